#!/usr/bin/env bash
# The MoQ live path, end to end (tests/interop/moq_live.py says what it runs and measures):
# ffmpeg encodes a live H.264 test pattern, moq-cli publishes it to moq-relay, `recoup serve
# --moq` relays it over WebTransport under each policy, and @moq/watch plays it in headless
# Chromium through `recoup link`, once per policy and run (with --viewer quic, moq-cli subscribes
# over raw QUIC instead of the browser). Installs ffmpeg, moq-relay, moq-cli
# and @moq/watch when missing (scripts/moq-deps.sh), builds recoup in release unless --recoup
# names a binary, then runs the harness with every other argument given here:
#
#   scripts/moq-live.sh [--recoup BIN] [--policies arq,autorec,crest] [--runs 5]
#       [--seconds 30] [--loss 5] [--rtt 60ms] [--rate 12Mbit] [--deadline 500ms]
#       [--direct] [--viewer chromium|quic] [--out results/moq-live]
#
# Writes OUT/moq-live.md (the table), OUT/runs.jsonl and OUT/player-POLICY.png. --direct plays
# from moq-relay itself, without recoup in the path.
set -euo pipefail
cd "$(dirname "$0")/.."

recoup=""
args=()
browser=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --viewer=quic) browser=0; args+=("$1"); shift ;;
        --viewer) [[ ${2:-} == quic ]] && browser=0; args+=("$1" "${2:-}"); shift 2 ;;
        --recoup) recoup=${2:?--recoup needs a binary}; shift 2 ;;
        --recoup=*) recoup=${1#--recoup=}; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
((browser == 0)) || command -v chromium >/dev/null 2>&1 || {
    echo "moq-live: chromium not found (Debian: apt-get install chromium, as root;" \
        "scripts/test.sh installs it)" >&2
    exit 1
}
# shellcheck source=scripts/moq-deps.sh
source scripts/moq-deps.sh moq-live
echo "moq-live: $moq_versions" >&2
if [[ -z $recoup ]]; then
    cargo build --release --locked -q -p recoup-cli
    recoup="${CARGO_TARGET_DIR:-target}/release/recoup"
fi

# shellcheck source=scripts/harness-procs.sh
source scripts/harness-procs.sh moq-live
run_harness python3 tests/interop/moq_live.py --recoup "$recoup" --relay "$moq_relay" \
    --publisher "$moq_cli" --site "$moq_site" --pid-file "$pids" "${args[@]}"
