#!/usr/bin/env bash
# Simulator benchmarks, one thread, release build (about 10 minutes on a 2-vCPU VM,
# build not counted):
#   1. x real time per CPU second per policy, built-in default scenario (60 s, seeds 1-3);
#   2. packets per CPU second on the bulk case (scenarios/bulk.toml: 100 Mbit/s, 1 % loss);
#   3. each policy's CPU against arq on the same run, and the cost of one decision in ns
#      (policy_bench), with the policy's estimated share of a run's CPU; where `perf` is
#      installed, that share also measured in the run (scripts/policy-share.sh);
#   4. CPU time against the number of flows sharing one path (1, 10, 100; the link rate grows
#      with the flows) and against the simulated duration, plotted to bench-scaling.png.
# Prints the tables and writes everything to OUT (default: bench-results/).
#   bash scripts/bench.sh [OUT]
# RECOUP_PGO=1 measures the profile-guided build of scripts/build-release.sh instead of the plain
# release build.
# Honours CARGO_TARGET_DIR. Name the machine and its load (printed below) with the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
mkdir -p "$OUT"
TARGET=${CARGO_TARGET_DIR:-target}

if [ "${RECOUP_PGO:-0}" = 1 ]; then
  # The profile-guided build of scripts/build-release.sh (about 10 more minutes the first time).
  BUILD="release, profile-guided (scripts/build-release.sh)"
  bash scripts/build-release.sh -p recoup-sim --example speed --example policy_cpu \
    -p recoup-recovery --example policy_bench -p recoup-cli --bin recoup
else
  BUILD="release"
  cargo build --release --locked -p recoup-sim --example speed --example policy_cpu
  cargo build --release --locked -p recoup-recovery --example policy_bench
  cargo build --release --locked -p recoup-cli --bin recoup
fi
SPEED="$TARGET/release/examples/speed"

{
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "rustc: $(rustc --version)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "build: $BUILD"
  echo "date: $(date -u +%FT%TZ)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

echo
echo "## 1. Default scenario, every policy (x real time per CPU second)"
"$SPEED" 3 | tee "$OUT/default.md"

echo
echo "## 2. Bulk: 200 MB at 100 Mbit/s, 1 % loss (packets per CPU second)"
"$SPEED" --scenario scenarios/bulk.toml 3 | tee "$OUT/bulk.md"

echo
echo "## 3. Policy CPU against arq (whole runs) and per decision"
"$TARGET/release/examples/policy_cpu" | tee "$OUT/policy_cpu.md"
"$TARGET/release/examples/policy_bench" | tee "$OUT/policy_bench.md"
# A policy's share of a run's CPU: ns per decision (one per packet sent, policy_bench) times the
# packets the default scenario sends, over the CPU of that run (step 1). The measure that counts is
# the overhead against arq: arq's row is policy_bench's own cost of driving the events, so the last
# column takes arq's ns per decision away first.
echo
echo "| policy | ns / decision | packets / run | CPU ms / run | policy share of run CPU | overhead vs arq |"
echo "|---|---|---|---|---|---|"
awk -F'|' '
  FNR == NR { gsub(/ /, "", $2); if ($5 ~ /[0-9]/) ns[$2] = $5 + 0; next }
  { gsub(/ /, "", $2) }
  $2 in ns {
    cpu = $7 * 1e6
    printf "| %s | %.1f | %d | %d | %.3f %% | %+.3f %% |\n", $2, ns[$2], $4, $7,
      ns[$2] * $4 / cpu * 100, (ns[$2] - ns["arq"]) * $4 / cpu * 100
  }' "$OUT/policy_bench.md" "$OUT/default.md" | tee "$OUT/policy_share.md"
echo
if command -v perf >/dev/null; then
  bash scripts/policy-share.sh "$TARGET/release/recoup" 8 | tee "$OUT/policy_share_perf.md"
else
  echo "(perf not installed: the policies' share measured in the run is skipped)"
fi

echo
echo "## 4. Scaling: flows on one path (10 s simulated, arq) and simulated duration (1 flow, arq)"
: > "$OUT/scaling.csv"
echo "kind,value,cpu_ms,packets" >> "$OUT/scaling.csv"
for n in 1 10 100; do
  "$SPEED" --duration 10 --flows "$n" 1 arq | tee "$OUT/flows-$n.md" |
    awk -F'|' -v n="$n" '$2 ~ /^ arq / { printf "flows,%s,%s,%s\n", n, $7 + 0, $4 + 0 }' >> "$OUT/scaling.csv"
done
for d in 15 30 60 120; do
  "$SPEED" --duration "$d" 1 arq | tee "$OUT/duration-$d.md" |
    awk -F'|' -v d="$d" '$2 ~ /^ arq / { printf "duration,%s,%s,%s\n", d, $7 + 0, $4 + 0 }' >> "$OUT/scaling.csv"
done
echo "| axis | value | CPU ms | packets sent | µs CPU / packet |"
echo "|---|---|---|---|---|"
awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %.2f |\n", $1, $2, $3, $4, $3 * 1000 / $4 }' "$OUT/scaling.csv"

python3 - "$OUT" <<'PY' || echo "(plot skipped: python3 with matplotlib needed)"
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = Path(sys.argv[1])
rows = list(csv.DictReader((out / "scaling.csv").open()))
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for ax, kind, label in [
    (axes[0], "flows", "flows on one path (10 s simulated)"),
    (axes[1], "duration", "simulated duration, s (1 flow)"),
]:
    pts = [(float(r["value"]), float(r["cpu_ms"]) / 1e3) for r in rows if r["kind"] == kind]
    xs, ys = zip(*pts)
    ax.plot(xs, ys, "o-")
    # The line through the origin and the largest point: linear growth lies on it.
    ax.plot([0, xs[-1]], [0, ys[-1]], ":", color="grey", label="linear")
    ax.set_xlabel(label)
    ax.set_ylabel("CPU s (arq)")
    ax.legend()
    if kind == "flows":
        ax.set_xscale("log")
        ax.set_yscale("log")
fig.tight_layout()
fig.savefig(out / "bench-scaling.png", dpi=120)
print(f"plot: {out / 'bench-scaling.png'}")
PY
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
