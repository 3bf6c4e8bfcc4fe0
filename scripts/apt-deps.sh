#!/usr/bin/env bash
# Install the Debian packages of the local desktop (cua_rl.envs.backends.x11, `cua-rl desktop-server`) and
# of the MiniWoB++ backend (chromium, chromium-driver: cua_rl/envs/backends/miniwob/), of
# the macOSWorld transport tests (x11vnc, openssh-server: real VNC and SSH servers on 127.0.0.1;
# the tests run their own sshd with its own config and keys, never the system one), and
# Tesseract's English model for the validator's OCR tier (cua_rl/validator/ocr.py); socat, which
# OSWorld's Chrome tasks launch to forward Chrome's debugging port 9222 to 1337.
# Used by `make test`: runs `apt-get update` once and `apt-get install -y --no-install-recommends`
# only when root and apt-get exist and a package is missing; writes the stamp file given as $1
# when everything is installed, so a second run installs nothing. Where installing is impossible
# it says why and exits 0: the desktop tests then skip, naming what is missing.
set -euo pipefail

PACKAGES=(
  xvfb xdotool x11-utils wmctrl openbox xterm mousepad imagemagick
  python3-pyatspi python3-jeepney at-spi2-core dbus-x11 util-linux
  libreoffice-calc libreoffice-writer libreoffice-gtk3 pcmanfm
  chromium chromium-driver socat
  x11vnc openssh-server
  bubblewrap
  tesseract-ocr tesseract-ocr-eng
)
stamp="${1:-}"

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  [ -n "$stamp" ] && touch "$stamp"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "apt-deps: apt-get not found; desktop and browser tests will skip (missing: ${missing[*]})" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "apt-deps: not root; desktop and browser tests will skip (missing: ${missing[*]})" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
[ -n "$stamp" ] && touch "$stamp"
