#!/usr/bin/env bash
# Each policy's share of the CPU of its own simulated run (issue 16, target 4), measured in the
# run rather than estimated from policy_bench: `perf` samples a `recoup run` of the built-in
# default scenario with that policy alone (60 s, SEEDS seeds, one thread), and a sample counts
# for the policy when its call stack passes through the policy dispatch
# (`recoup_recovery::policy::Policy`, whose frames perf reports even where the code is inlined).
# arq's share is the cost of asking a policy at all; a policy's overhead is its share less
# arq's. The recoup binary needs debug info (the release profile keeps it).
#   bash scripts/policy-share.sh [RECOUP_BIN] [SEEDS]
# Defaults: target/release/recoup (built if missing), 12 seeds. Needs `perf` (Debian:
# linux-perf) and permission to sample (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/recoup}
SEEDS=${2:-12}
if ! command -v perf >/dev/null; then
  echo "policy-share: perf not found (Debian: apt-get install linux-perf)" >&2
  exit 1
fi
if [ ! -x "$BIN" ]; then
  cargo build --release --locked -p recoup-cli --bin recoup
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The default scenario's path and application: everything before its first [[policy]].
HEAD=$(sed '/^\[\[policy\]\]/,$d' scenarios/default.toml)

echo "policy share of its own run: default scenario, $SEEDS seeds, $("$BIN" --version 2>/dev/null || echo recoup)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
echo "| policy | samples | in the policy | share of run CPU | overhead vs arq |"
echo "|---|---|---|---|---|"
arq_share=""
for policy in arq or3 art too autorec art-mab ladr-rrl; do
  {
    echo "$HEAD"
    echo "[[policy]]"
    echo "name = \"$policy\""
    # The default scenario's AutoRec parameters.
    [ "$policy" = autorec ] && echo 'params = "alpha=30ms,beta=0.3,gamma=0.2"'
  } > "$WORK/$policy.toml"
  perf record -q -o "$WORK/perf.data" -F 8000 --call-graph dwarf,32768 \
    "$BIN" run "$WORK/$policy.toml" --seeds "$SEEDS" --jobs 1 --out "$WORK/out" >/dev/null
  read -r total hits < <(perf script -i "$WORK/perf.data" --inline 2>/dev/null | awk '
    /^[^ \t]/ { if (n) { total++; hits += hit }; n = 1; hit = 0; next }
    /recoup_recovery::policy::Policy as/ { hit = 1 }
    END { if (n) { total++; hits += hit }; print total, hits }')
  share=$(awk -v h="$hits" -v t="$total" 'BEGIN { printf "%.2f", 100 * h / t }')
  [ "$policy" = arq ] && arq_share=$share
  over=$(awk -v s="$share" -v a="$arq_share" 'BEGIN { printf "%+.2f", s - a }')
  echo "| $policy | $total | $hits | $share % | $over % |"
done
