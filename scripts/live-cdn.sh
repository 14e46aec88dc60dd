#!/usr/bin/env bash
# The live CDN path, end to end (tests/interop/live_cdn.py says what it runs and measures):
# ffmpeg encodes low-latency DASH into an HTTP/1.1 origin, `recoup serve --origin` relays it
# over HTTP/3, dash.js plays it in headless Chromium through `recoup link`, once per policy and
# run. Installs ffmpeg and dash.js when missing (scripts/dash-deps.sh), builds recoup in release
# unless --recoup names a binary, makes the player site, then runs the harness with every other
# argument given here:
#
#   scripts/live-cdn.sh [--recoup BIN] [--policies arq,autorec,crest] [--runs 5]
#       [--seconds 60] [--loss 5] [--rtt 60ms] [--rate 12Mbit] [--out results/live-cdn]
#
# Writes OUT/live-cdn.md (the table), OUT/runs.jsonl and OUT/player-POLICY.png.
set -euo pipefail
cd "$(dirname "$0")/.."

recoup=""
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --recoup) recoup=${2:?--recoup needs a binary}; shift 2 ;;
        --recoup=*) recoup=${1#--recoup=}; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
command -v chromium >/dev/null 2>&1 || {
    echo "live-cdn: chromium not found (Debian: apt-get install chromium, as root;" \
        "scripts/test.sh installs it)" >&2
    exit 1
}
# shellcheck source=scripts/dash-deps.sh
source scripts/dash-deps.sh live-cdn
if [[ -z $recoup ]]; then
    cargo build --release --locked -q -p recoup-cli
    recoup="${CARGO_TARGET_DIR:-target}/release/recoup"
fi

# shellcheck source=scripts/harness-procs.sh
source scripts/harness-procs.sh live-cdn
site="$work/site"
mkdir -p "$site"
cp web/dash/index.html web/dash/player.js web/player.css "$dashjs" "$site/"
run_harness python3 tests/interop/live_cdn.py --recoup "$recoup" --site "$site" \
    --pid-file "$pids" "${args[@]}"
