#!/usr/bin/env bash
# One GPU check of the VLM stack in under 8 minutes on one H100, written to one Markdown file.
# Models: Qwen2-VL-2B and -7B *shapes* (bench_vlm_gpu.SHAPES: the published config sizes) with
# random weights, bf16, built in memory (no download). Parts (benchmarks/gpu/parts.py):
#   judge       QwenVLJudge verdicts/s at batch 1/8/32 (2B, 7B)
#   generate    VLMPolicy.generate tokens/s against a plain model.generate, batch 1/8/32 (2B, 7B)
#   update      one PPO update (vlm_update): tokens/s and peak memory, LoRA, gradient
#               checkpointing on and off, minibatch 8 and 32 (2B, 7B)
#   async-lagN  the training loop (cua_rl.training.train.train) on SimDesk, 8 envs, for
#               --async-seconds with ppo.vlm.max_policy_lag 0 (synchronous) and 1
#               (asynchronous): trajectories/min of each and their ratio (the random 2B shape)
# The policy, screen and loop settings are configs/simdesk_vlm.yaml's (--tiny:
# configs/simdesk_vlm_cpu.yaml); benchmarks/gpu/report.py writes the Markdown.
#
# Status: written for a GPU machine; not yet run on one. Only --tiny (tiny shape, CPU) has run,
# also in tests/benchmarks/test_gpu_check.py. The time budgets below are estimates.
#
#   bash benchmarks/gpu/check.sh                      # on a GPU: benchmarks/results/gpu_check.md
#   bash benchmarks/gpu/check.sh --tiny --out /tmp/gpu_check.md    # CPU dry run, < 40 s
#   # on a lent device machine (no network, no .git, python3 has torch), wheels in .whl:
#   bash benchmarks/gpu/check.sh --wheels .whl --commit SHA --logs "$OUT" --out "$OUT/gpu_check.md"
#
# Options:
#   --tiny               the tiny shape on CPU, batch 1 and 2, 4 tokens, --async-seconds 5
#   --out FILE           the report (default benchmarks/results/gpu_check.md)
#   --wheels DIR         first install the wheels in DIR (pip --no-index --find-links DIR
#                        --no-deps --target <temporary folder>, put on PYTHONPATH)
#   --commit SHA         the commit to name (default: `git rev-parse HEAD`, if there is git)
#   --async-seconds N    training seconds per max_policy_lag (default 120; --tiny 5)
#   --python PY          the interpreter (default .venv/bin/python if present, else python3)
#   --limit N            hard limit of the whole check in seconds (default 470; --tiny 240)
#   --logs DIR           keep each part's log and JSON result in DIR
#
# Each part runs in its own Python process under timeout(1), in order, with its own time
# budget (below) plus what the earlier parts left unused, and never past --limit (5 s are kept
# for the report): the whole check cannot overrun, and a part that starts with under 5 s left
# is reported as not run. A part that times out, runs out of memory or fails is reported as
# such (with the rows it finished) and the rest still run. With --tiny all parts share one
# process: each import of torch + transformers + peft costs ~6 s on 2 busy cores, and five of
# them would not fit 40 s (tests/benchmarks/test_gpu_check.py checks the per-process handling
# with a stand-in interpreter). HF_HUB_OFFLINE=1 is set; wandb is disabled.
# Exit status: 0 when every part finished, 1 when the report was written but some part did
# not, 2 for a usage error, 3 when Python packages are missing (nothing is run).
#
# The device image has torch, transformers, peft and accelerate but not qwen-vl-utils,
# gymnasium (+ farama-notifications) or stable-baselines3: carry them as wheels (all pure
# Python), fetched here with (`echo /.whl/ >> .git/info/exclude` first; carry=[".whl"]):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl \
#     qwen-vl-utils==0.0.14 gymnasium==1.4.0 farama-notifications==0.0.4 stable-baselines3==2.9.2
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 2
COMMAND="bash benchmarks/gpu/check.sh$(printf ' %q' "$@")"

usage() {  # the header above, as help
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit "$1"
}

tiny=0 out="benchmarks/results/gpu_check.md" wheels="" commit="" async_seconds="" python=""
limit="" logs=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --tiny) tiny=1 ;;
    --out) out=${2:?--out needs a file}; shift ;;
    --wheels) wheels=${2:?--wheels needs a folder}; shift ;;
    --commit) commit=${2:?--commit needs a value}; shift ;;
    --async-seconds) async_seconds=${2:?--async-seconds needs seconds}; shift ;;
    --python) python=${2:?--python needs an interpreter}; shift ;;
    --limit) limit=${2:?--limit needs seconds}; shift ;;
    --logs) logs=${2:?--logs needs a folder}; shift ;;
    -h|--help) usage 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for n in "$async_seconds" "$limit"; do
  if [ -n "$n" ] && ! [[ "$n" =~ ^[0-9]+$ ]]; then
    echo "check.sh: --async-seconds and --limit take whole seconds, got '$n'" >&2
    exit 2
  fi
done

if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
if ! command -v "$python" >/dev/null 2>&1; then
  echo "check.sh: no Python interpreter '$python' (give one with --python)" >&2
  exit 3
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
site=""
if [ -n "$wheels" ]; then
  shopt -s nullglob
  files=("$wheels"/*.whl)
  shopt -u nullglob
  if [ "${#files[@]}" -eq 0 ]; then
    echo "check.sh: --wheels $wheels: no .whl file in it" >&2
    exit 3
  fi
  site="$WORK/site"
  echo "check.sh: installing ${#files[@]} wheels from $wheels into $site" >&2
  if ! "$python" -m pip install -q --no-index --find-links "$wheels" --no-deps --no-compile \
      --no-cache-dir --target "$site" "${files[@]}"; then
    echo "check.sh: installing the wheels of $wheels failed (see above)" >&2
    exit 3
  fi
fi
export PYTHONPATH="${site:+$site:}$REPO${PYTHONPATH:+:$PYTHONPATH}"

# The packages the parts import (module: pip name), found without importing them.
if ! "$python" - <<'EOF'
import importlib.util
import sys

need = {
    "torch": "torch", "transformers": "transformers", "peft": "peft",
    "accelerate": "accelerate", "torchvision": "torchvision", "tokenizers": "tokenizers",
    "qwen_vl_utils": "qwen-vl-utils", "gymnasium": "gymnasium",
    "stable_baselines3": "stable-baselines3", "yaml": "pyyaml", "PIL": "pillow",
    "numpy": "numpy", "tqdm": "tqdm", "cloudpickle": "cloudpickle",
}
missing = [pip for mod, pip in need.items() if importlib.util.find_spec(mod) is None]
if missing:
    print(f"check.sh: {sys.executable} lacks the Python packages: {' '.join(missing)}.\n"
          "check.sh: carry them as wheels and pass --wheels DIR (see the header of "
          "benchmarks/gpu/check.sh for the pip download command).", file=sys.stderr)
    sys.exit(3)
EOF
then
  exit 3
fi

if [ "$tiny" -eq 1 ]; then
  # one part, which may take the whole limit: ~40 s alone, over 50 s on a loaded 2-core machine
  async_seconds=${async_seconds:-5} limit=${limit:-240}
  config=configs/simdesk_vlm_cpu.yaml dtype=bfloat16
  common=(--device cpu --dtype "$dtype" --config "$config" --batch-sizes 1 2 --n-requests 2
          --new-tokens 4 --update-rows 8 --async-seconds "$async_seconds" --threads 1)
  # id|parts|shape|time budget in seconds
  parts=("tiny|judge,generate,update,async-lag0,async-lag1|tiny|$((limit - 5))")
else
  async_seconds=${async_seconds:-120} limit=${limit:-470}
  config=configs/simdesk_vlm.yaml dtype=bfloat16
  common=(--device cuda --dtype "$dtype" --config "$config" --batch-sizes 1 8 32
          --n-requests 64 --new-tokens 32 --update-rows 32 --async-seconds "$async_seconds")
  if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "check.sh: torch sees no CUDA device (--tiny runs the CPU dry run)" >&2
    exit 3
  fi
  parts=("judge-2b|judge|2b|20" "judge-7b|judge|7b|25"
         "generate-2b|generate|2b|25" "generate-7b|generate|7b|30"
         "update-2b|update|2b|25" "update-7b|update|7b|30"
         "async-lag0|async-lag0|2b|$((async_seconds + 30))"
         "async-lag1|async-lag1|2b|$((async_seconds + 30))")
fi

if [ -z "$commit" ]; then
  commit=$(git rev-parse HEAD 2>/dev/null || true)
  if [ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit (with uncommitted changes)"
  fi
  commit=${commit:-"unknown (no git; pass --commit)"}
fi

now() { date +%s.%N; }
start=$(now)
reserve=5  # seconds kept for the report
: >"$WORK/status.tsv"
n_bad=0
for i in "${!parts[@]}"; do
  IFS='|' read -r id names shape own <<<"${parts[$i]}"
  earlier=0
  for j in "${!parts[@]}"; do
    [ "$j" -lt "$i" ] && earlier=$((earlier + ${parts[$j]##*|}))
  done
  # its own budget + what the earlier parts left unused, within what is left of --limit
  budget=$(awk -v s="$start" -v n="$(now)" -v l="$limit" -v o="$own" -v e="$earlier" \
    -v r="$reserve" 'BEGIN { used = n - s; b = o + (e > used ? e - used : 0);
                             if (b > l - used - r) b = l - used - r; printf "%d", b }')
  if [ "$budget" -lt 5 ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$names" "$shape" 0 -1 0 >>"$WORK/status.tsv"
    n_bad=$((n_bad + 1))
    continue
  fi
  echo "check.sh: $id ($names, shape $shape), at most $budget s" >&2
  t0=$(now)
  # shellcheck disable=SC2086  # the part names are words
  timeout -k 5 "$budget" "$python" benchmarks/gpu/parts.py ${names//,/ } --shape "$shape" \
    --json "$WORK/$id.json" "${common[@]}" >"$WORK/$id.log" 2>&1
  rc=$?
  seconds=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  [ "$rc" -eq 0 ] || { n_bad=$((n_bad + 1)); tail -n 5 "$WORK/$id.log" >&2; }
  echo "check.sh: $id: exit $rc after $seconds s" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$names" "$shape" "$budget" "$rc" "$seconds" \
    >>"$WORK/status.tsv"
done
elapsed=$(awk -v s="$start" -v n="$(now)" 'BEGIN { printf "%.1f", n - s }')

if [ -n "$logs" ]; then
  mkdir -p "$logs" && cp "$WORK"/*.log "$WORK"/status.tsv "$logs"/ 2>/dev/null
  cp "$WORK"/*.json "$logs"/ 2>/dev/null
fi
report=(--work "$WORK" --out "$out" --command "$COMMAND" --commit "$commit" --config "$config"
        --dtype "$dtype" --elapsed "$elapsed" --limit "$limit")
[ "$tiny" -eq 1 ] && report+=(--tiny)
if ! "$python" benchmarks/gpu/report.py "${report[@]}" >"$WORK/report.log" 2>&1; then
  cat "$WORK/report.log" >&2
  echo "check.sh: writing the report failed" >&2
  exit 1
fi
echo "check.sh: wrote $out in $elapsed s; $((${#parts[@]} - n_bad)) of ${#parts[@]} processes ok" >&2
[ "$n_bad" -eq 0 ]
