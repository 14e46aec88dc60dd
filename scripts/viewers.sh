#!/usr/bin/env bash
# Scale benchmark: N concurrent live viewers on one `recoup serve` over loopback for
# D seconds, all from one `recoup viewers` process (one connection each, every frame checked).
# Reports the server's CPU time (utime+stime from /proc/PID/stat) and peak RSS (VmHWM), per
# viewer too, and checks that every connection was released when its viewer closed it (the
# server's "connection released" log lines, before any idle timeout could have fired).
#
#   scripts/viewers.sh [--viewers 1000] [--seconds 60] [--bitrate 200kbps] [--fps 30]
#                      [--bin target/release] [--serve-bin DIR] [--max-connections N]
#
# --serve-bin runs another build's `recoup serve` (before/after comparisons) against the
# viewers of --bin.
#
# Every process it starts is killed on exit; the viewers are bounded by a timeout.
set -euo pipefail

viewers=1000
seconds=60
bitrate=200kbps
fps=30
bin=target/release
serve_bin=
serve_extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --viewers) viewers=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --bitrate) bitrate=$2; shift 2 ;;
        --fps) fps=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --serve-bin) serve_bin=$2; shift 2 ;;
        --max-connections) serve_extra+=(--max-connections "$2"); shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

recoup=$bin/recoup
serve=${serve_bin:-$bin}/recoup
for b in "$recoup" "$serve"; do
    [[ -x $b ]] || { echo "no $b: cargo build --release -p recoup-cli" >&2; exit 2; }
done
# shellcheck source=scripts/procs.sh
source "$(dirname "$0")/procs.sh"

RUST_LOG=info "$serve" serve --listen 127.0.0.1:0 "${serve_extra[@]}" \
    >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!; pids+=("$server_pid")
addr=$(address_of serve)

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
server_cpu0=$(cpu "$server_pid")
server_rss0=$(rss "$server_pid")
start_ns=$(date +%s%N)

status=0
timeout $((seconds + 120)) "$recoup" viewers --insecure --count "$viewers" --timeout 30s \
    "https://$addr/live/v{i}?bitrate=$bitrate&fps=$fps&gop=30&duration=${seconds}s" \
    >"$work/viewers.out" 2>"$work/viewers.err" &
viewers_pid=$!; pids+=("$viewers_pid")
# The viewers' own cost (the process under `timeout`), sampled until they exit.
viewers_cpu=0; viewers_hwm=0
while kill -0 "$viewers_pid" 2>/dev/null; do
    child=$(pgrep -P "$viewers_pid" | head -1 || true)
    if [[ -n $child ]]; then
        viewers_cpu=$(cpu "$child" 2>/dev/null || echo "$viewers_cpu")
        viewers_hwm=$(hwm "$child" 2>/dev/null || echo "$viewers_hwm")
    fi
    sleep 0.5
done
wait "$viewers_pid" || status=$?
wall=$(( ($(date +%s%N) - start_ns) / 1000000 ))
server_cpu=$(( $(cpu "$server_pid") - server_cpu0 ))
server_hwm=$(hwm "$server_pid")
# Connections drain for three PTOs after the viewers' CONNECTION_CLOSE: give them a second.
sleep 1
released=$(grep -c "connection released" "$work/serve.err" || true)
open_after=$(grep "connection released" "$work/serve.err" | tail -1 | sed -n 's/.*open=\([0-9]*\).*/\1/p')
server_rss_after=$(rss "$server_pid")

echo "machine: $(nproc) cores, $(uname -r); server $serve, viewers $recoup"
echo "viewers $viewers x ${seconds}s at $bitrate, $fps fps, one recoup viewers process"
cat "$work/viewers.out"
[[ $status -eq 0 ]] || { echo "recoup viewers exit $status:"; tail -5 "$work/viewers.err"; }
awk -v s="$server_cpu" -v t="$ticks" -v w="$wall" -v n="$viewers" -v vc="$viewers_cpu" 'BEGIN {
    printf "wall %.1f s; server CPU %.1f s (%.1f %% of one core), %.2f ms per viewer-second\n",
        w / 1000, s / t, 100 * s / t / (w / 1000), 1000 * s / t / (n * w / 1000);
    printf "viewers process CPU %.1f s\n", vc / t }'
echo "server RSS: $((server_rss0 / 1024)) MiB idle before, peak $((server_hwm / 1024)) MiB" \
     "($(( (server_hwm - server_rss0) / viewers )) KiB per viewer), $((server_rss_after / 1024)) MiB after"
echo "viewers process peak RSS $((viewers_hwm / 1024)) MiB"
echo "connections released by the server: $released of $viewers (open after: ${open_after:-?})"
[[ $status -eq 0 && $released -eq $viewers ]]
