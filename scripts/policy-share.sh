#!/usr/bin/env bash
# Each policy's share of the CPU of its own run (the target: under 0.5 % over arq), measured in the
# run rather than estimated from policy_bench: `perf` samples a run with that policy alone, and a
# sample counts for the policy when its call stack passes through the policy dispatch
# (`recoup_recovery::policy::Policy`, whose frames perf reports even where the code is inlined).
# arq's share is the cost of asking a policy at all; a policy's overhead is its share less arq's.
# The recoup binary needs debug info (the release profile keeps it).
#
#   bash scripts/policy-share.sh [RECOUP_BIN] [SEEDS]
#       the simulator: `recoup run` of the built-in default scenario with that policy alone
#       (60 s, SEEDS seeds, one thread; default 12 seeds);
#   bash scripts/policy-share.sh --serve [RECOUP_BIN] [VIEWERS]
#       a real server: `recoup serve --policy P` on loopback, sampled while VIEWERS live viewers
#       (default 16, one `recoup viewers` process) watch a 20 s, 4 Mbit/s stream each through
#       one `recoup link` with the default scenario's path scaled to them (60 ms RTT, 5 %
#       Bernoulli loss, VIEWERS x 12 Mbit/s, a drop-tail queue of VIEWERS x 100 packets).
#
# RECOUP_BIN defaults to target/release/recoup (built if missing). Needs `perf` (Debian:
# linux-perf) and permission to sample (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=sim
if [ "${1:-}" = --serve ]; then
  MODE=serve
  shift
fi
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/recoup}
if [ "$MODE" = sim ]; then
  SEEDS=${2:-12}
else
  VIEWERS=${2:-16}
fi
if ! command -v perf >/dev/null; then
  echo "policy-share: perf not found (Debian: apt-get install linux-perf)" >&2
  exit 1
fi
if [ ! -x "$BIN" ]; then
  cargo build --release --locked -p recoup-cli --bin recoup
fi
# shellcheck source=scripts/procs.sh
source scripts/procs.sh

# The default scenario's AutoRec parameters, which it runs with in both modes.
AUTOREC_PARAMS="alpha=30ms,beta=0.3,gamma=0.2"

# The policy's name and, for AutoRec, its parameters, as --policy takes them.
policy_spec() {
  if [ "$1" = autorec ]; then echo "autorec:$AUTOREC_PARAMS"; else echo "$1"; fi
}

# Samples a `recoup run` of the default scenario with policy $1 into $work/perf.data.
sample_sim() {
  {
    # The default scenario's path and application: everything before its first [[policy]].
    sed '/^\[\[policy\]\]/,$d' scenarios/default.toml
    echo "[[policy]]"
    echo "name = \"$1\""
    [ "$1" = autorec ] && echo "params = \"$AUTOREC_PARAMS\""
  } > "$work/$1.toml"
  perf record -q -o "$work/perf.data" -F 8000 --call-graph dwarf,32768 \
    "$BIN" run "$work/$1.toml" --seeds "$SEEDS" --jobs 1 --out "$work/out" >/dev/null
}

# Samples a `recoup serve --policy $1` while the viewers watch, into $work/perf.data.
sample_serve() {
  "$BIN" serve --listen 127.0.0.1:0 --policy "$(policy_spec "$1")" --cc bbr \
    >"$work/serve.out" 2>"$work/serve.err" &
  local server=$!
  pids+=("$server")
  local addr
  addr=$(address_of serve)
  "$BIN" link --listen 127.0.0.1:0 --upstream "$addr" --rtt 60ms --loss "bernoulli 5%" \
    --rate "$((12 * VIEWERS))Mbps" --queue "droptail packets=$((100 * VIEWERS))" \
    >"$work/link.out" 2>"$work/link.err" &
  local link=$!
  pids+=("$link")
  local via
  via=$(address_of link)
  perf record -q -o "$work/perf.data" -F 4000 --call-graph dwarf,32768 -p "$server" \
    >/dev/null 2>&1 &
  local sampler=$!
  sleep 0.5
  if ! timeout 120 "$BIN" viewers --insecure --count "$VIEWERS" \
    "https://$via/live/v{i}?bitrate=4Mbps&fps=30&gop=30&duration=20s" >"$work/viewers" 2>&1; then
    echo "policy-share: the viewers of $1 failed:" >&2
    tail -5 "$work/viewers" >&2
    exit 1
  fi
  kill -INT "$sampler"
  wait "$sampler" || true
  kill "$server" "$link"
  wait "$server" "$link" 2>/dev/null || true
}

if [ "$MODE" = sim ]; then
  echo "policy share of its own run: default scenario, $SEEDS seeds, $("$BIN" --version 2>/dev/null || echo recoup)"
else
  echo "policy share of a server's CPU: recoup serve, $VIEWERS live viewers at 4 Mbit/s for 20 s" \
    "through recoup link (60 ms, 5 % loss), $("$BIN" --version 2>/dev/null || echo recoup)"
fi
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
echo "| policy | samples | in the policy | share of run CPU | overhead vs arq |"
echo "|---|---|---|---|---|"
arq_share=""
for policy in arq or3 art too autorec art-mab ladr-rrl; do
  "sample_$MODE" "$policy"
  read -r total hits < <(perf script -i "$work/perf.data" --inline 2>/dev/null | awk '
    /^[^ \t]/ { if (n) { total++; hits += hit }; n = 1; hit = 0; next }
    /recoup_recovery::policy::Policy as/ { hit = 1 }
    END { if (n) { total++; hits += hit }; print total, hits }')
  share=$(awk -v h="$hits" -v t="$total" 'BEGIN { printf "%.2f", 100 * h / t }')
  [ "$policy" = arq ] && arq_share=$share
  over=$(awk -v s="$share" -v a="$arq_share" 'BEGIN { printf "%+.2f", s - a }')
  echo "| $policy | $total | $hits | $share % | $over % |"
done
