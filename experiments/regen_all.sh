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
# breakdown, draft-wu's comparison) runs after these; autorec/compare.py and
# autorec/sensitivity.py are shared modules, not figures.
for extra in experiments/*/*.py; do
  case " ${scripts[*]} " in *" $extra "*) continue ;; esac
  case "$extra" in experiments/autorec/compare.py | experiments/autorec/sensitivity.py) continue ;; esac
  scripts+=("$extra")
done

# Scripts that make more than one table, each invocation as its tables' last line names it
# ("Made at commit ... by `...`"). The quick form runs each variant too, without the sizes.
declare -A variants=(
  [experiments/ladr/causes.py]="pacing|rrl|ladr"
  [experiments/ladr/table2.py]="|--setting deep|--setting wifi"
  [experiments/fleet/deployment.py]="--streams 1000|--cc bbr --streams 400|--cc bbr3 --streams 400"
  [experiments/beyond/pareto.py]="|--heldout"
  [experiments/draftwu/compare.py]="--seeds 10 --duration 60s --streams 1000|--only fleet-moq --streams 1000"
)
quick=0
case " ${flags[*]:-} " in *" --quick "*) quick=1 ;; esac

for s in "${scripts[@]}"; do
  IFS='|' read -r -a runs <<<"${variants[$s]-}"
  [ ${#runs[@]} -gt 0 ] || runs=("")
  for r in "${runs[@]}"; do
    read -r -a args <<<"$r"
    if [ $quick = 1 ]; then
      # Sizes (--streams, --seeds, --duration) are the full run's; the quick form has its own.
      kept=()
      skip=0
      for a in "${args[@]}"; do
        if [ $skip = 1 ]; then skip=0; continue; fi
        case "$a" in --streams | --seeds | --duration) skip=1 ;; *) kept+=("$a") ;; esac
      done
      args=("${kept[@]}")
    fi
    printf '\n==> %s %s %s\n' "$s" "${args[*]}" "${flags[*]:-}"
    python3 "$s" "${args[@]}" "${flags[@]}"
  done
done
