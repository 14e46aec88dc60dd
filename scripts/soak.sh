#!/usr/bin/env bash
# Soak benchmark: N concurrent live viewers (`recoup get` on /live/...) for D seconds through
# `recoup link` on loopback. Records the server's CPU time (utime+stime from /proc/PID/stat) and
# peak RSS (VmHWM), the link's too, then checks every viewer's stream frame by frame (CRC-32,
# sequence numbers, frame count) with tests/interop/live_player.py's checker.
#
#   scripts/soak.sh [--viewers 50] [--seconds 60] [--bitrate 1Mbps] [--bin target/release]
#                   [--link-args "--rtt 40ms --rate 10Mbps --loss 'bernoulli 1%' ..."]
#
# Every process it starts is killed on exit; viewers are bounded by a timeout.
set -euo pipefail

viewers=50
seconds=60
bitrate=1Mbps
bin=target/release
link_args=(--rtt 40ms --rate 10Mbps --queue "droptail packets=100" --loss "bernoulli 1%")
while [[ $# -gt 0 ]]; do
    case "$1" in
        --viewers) viewers=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --bitrate) bitrate=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --link-args) eval "link_args=($2)"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
recoup=$bin/recoup
[[ -x $recoup ]] || { echo "no $recoup: cargo build --release -p recoup-cli" >&2; exit 2; }
# shellcheck source=scripts/procs.sh
source "$repo/scripts/procs.sh"

"$recoup" serve --listen 127.0.0.1:0 --cc bbr >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!; pids+=("$server_pid")
server_addr=$(address_of serve)
"$recoup" link --listen 127.0.0.1:0 --upstream "$server_addr" "${link_args[@]}" \
    >"$work/link.out" 2>"$work/link.err" &
link_pid=$!; pids+=("$link_pid")
link_addr=$(address_of link)

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
server_cpu0=$(cpu "$server_pid"); link_cpu0=$(cpu "$link_pid")
start_ns=$(date +%s%N)

viewer_pids=()
for i in $(seq "$viewers"); do
    timeout $((seconds + 60)) "$recoup" get --insecure -o "$work/v$i.bin" \
        "https://$link_addr/live/v$i?bitrate=$bitrate&fps=30&gop=30&duration=${seconds}s" \
        2>"$work/v$i.err" &
    viewer_pids+=($!)
done
failed=0
for p in "${viewer_pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
wall=$(( ($(date +%s%N) - start_ns) / 1000000 ))
server_cpu=$(( $(cpu "$server_pid") - server_cpu0 )); link_cpu=$(( $(cpu "$link_pid") - link_cpu0 ))
server_hwm=$(hwm "$server_pid"); link_hwm=$(hwm "$link_pid")
kill -INT "$link_pid"; wait "$link_pid" 2>/dev/null || true

echo "viewers $viewers x ${seconds}s at $bitrate through: ${link_args[*]}"
echo "wall ${wall} ms; viewers that failed: $failed"
awk -v s="$server_cpu" -v l="$link_cpu" -v t="$ticks" -v w="$wall" 'BEGIN {
    printf "server CPU %.1f s (%.1f %% of one core), link CPU %.1f s (%.1f %%)\n",
        s / t, 100 * s / t / (w / 1000), l / t, 100 * l / t / (w / 1000) }'
echo "server max RSS $((server_hwm / 1024)) MiB, link max RSS $((link_hwm / 1024)) MiB"
sed -n '2,$p' "$work/link.out"
python3 - "$repo/tests/interop" "$work" "$viewers" "$seconds" <<'EOF'
import sys

sys.path.insert(0, sys.argv[1])
from live_player import NS, FrameChecker, frames_in

work, viewers, seconds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = frames_in(seconds * NS, 30)
bad = []
total = 0
for i in range(1, viewers + 1):
    c = FrameChecker()
    try:
        with open(f"{work}/v{i}.bin", "rb") as f:
            c.push(f.read())
    except OSError as e:
        bad.append(f"viewer {i}: {e}")
        continue
    c.finish(True)
    total += c.frames
    if c.frames != want or c.bad_frames or c.missing or c.errors:
        bad.append(f"viewer {i}: {c.frames}/{want} frames, {c.bad_frames} bad, "
                   f"{c.missing} missing {c.errors[:3]}")
print(f"frames verified: {total} of {viewers * want} (CRC-32, sequence, count)")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
[[ $failed -eq 0 ]]
