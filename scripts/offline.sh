#!/usr/bin/env bash
# Run a command inside a private network namespace with only loopback up, so nothing it starts
# (Ray, Chromium, wandb, a model hub client) can reach the network. Used by `make test`.
#
#   scripts/offline.sh .venv/bin/python -m pytest
#
# It needs unshare(1) and ip(8) and the right to create a network namespace (root, or
# unprivileged user namespaces). If that is not possible it says so and exits 3, unless
# CUA_RL_ALLOW_NETWORK=1 is set, in which case it runs the command without isolation and says so.
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/offline.sh COMMAND [ARGS...]" >&2
  exit 2
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline HF_DATASETS_OFFLINE=1

why=""
if ! command -v unshare >/dev/null 2>&1; then
  why="unshare(1) is not installed (Debian package util-linux)"
elif ! command -v ip >/dev/null 2>&1; then
  why="ip(8) is not installed (Debian package iproute2)"
else
  userns=()
  [ "$(id -u)" -ne 0 ] && userns=(--user --map-root-user)
  if probe=$(unshare "${userns[@]}" --net sh -c 'ip link set lo up' 2>&1); then
    export CUA_RL_NETNS=1
    exec unshare "${userns[@]}" --net bash -c 'ip link set lo up && exec "$@"' offline "$@"
  fi
  why="cannot create a network namespace: ${probe:-unshare failed}"
fi

if [ "${CUA_RL_ALLOW_NETWORK:-0}" = "1" ]; then
  echo "offline.sh: WARNING: $why; running WITH network access because CUA_RL_ALLOW_NETWORK=1" >&2
  exec "$@"
fi
echo "offline.sh: ERROR: $why." >&2
echo "offline.sh: the test suite must run without network access; run as root, enable unprivileged" >&2
echo "offline.sh: user namespaces, or set CUA_RL_ALLOW_NETWORK=1 to run without isolation." >&2
exit 3
