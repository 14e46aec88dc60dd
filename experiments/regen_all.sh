#!/usr/bin/env bash
# Regenerates every figure table in EXPERIMENTS.md (experiments/figures/*.md and *.png) by
# running each reproduction script in turn. Each table ends with the commit and the command
# that made it (experiments/common.py). Full runs take hours on a 2-core machine; --quick runs
# every script's smoke version instead (its outputs go to *-quick.* or experiments/results/quick/
# and never replace the committed figures).
#
#   bash experiments/regen_all.sh [--quick] [--jobs N]
#
# Set RECOUP_BIN to use a given release binary; otherwise the first script builds one.
set -euo pipefail
cd "$(dirname "$0")/.."

flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) flags+=(--quick) ;;
    --jobs) flags+=(--jobs "$2"); shift ;;
    *) echo "usage: $0 [--quick] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done

scripts=(
  experiments/autorec/fig13_formula.py
  experiments/autorec/fig14_alpha.py
  experiments/autorec/fig15_beta.py
  experiments/autorec/fig16_gamma.py
  experiments/autorec/fig17_opportunistic.py
  experiments/autorec/fig18_art.py
  experiments/art/fig19_nmax.py
  experiments/art/fig20_21_files.py
  experiments/burst/ge_burst.py
  experiments/fec/fig19_rtc.py
  experiments/fec/fig20_tambur.py
  experiments/fleet/deployment.py
)
# Every other script in experiments/<group>/ (ART Figs. 22 and 24, why_art, the Fig. 18 latency
# breakdown) runs after these; compare.py and sensitivity.py are shared modules, not figures.
for extra in experiments/*/*.py; do
  case " ${scripts[*]} " in *" $extra "*) continue ;; esac
  case "$extra" in */compare.py | */sensitivity.py) continue ;; esac
  scripts+=("$extra")
done

for s in "${scripts[@]}"; do
  printf '\n==> %s %s\n' "$s" "${flags[*]:-}"
  python3 "$s" "${flags[@]}"
done
