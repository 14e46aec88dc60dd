#!/usr/bin/env bash
# The "objects" benchmark on loopback: recoup serve next to quic-go's HTTP/3 server, both fetched
# from by the same quic-go client through `recoup link` (tests/interop/objects_bench.py says what
# it measures). Builds the quic-go server and client (tests/peers/quicgo) with `go build`, then
# runs the Python harness with every argument given here.
#
#   scripts/objects-bench.sh --recoup BIN [--runs 5] [--loss 2%,5%] [--duration 30s]
#       [--servers quicgo,recoup,recoup-cubic,recoup-newreno] [--serve-args="--policy autorec"]
#       [--quick] [--qlog DIR] [--out results/objects-bench/]
#
# The recoup binary comes from --recoup or RECOUP_BIN. The Go programs are built into
# $QUICGO_OUT (default: a temporary directory removed at the end); quic-go comes from the Go
# module proxy at the version pinned in tests/peers/quicgo/go.mod. Every server and link the
# harness starts is stopped on the way out, also on Ctrl-C or SIGTERM.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "objects-bench: go not found: the quic-go server and client (the client is used against" \
    "every server) need Go $(sed -n 's/^go //p' "$repo/tests/peers/quicgo/go.mod") or newer" >&2
  exit 2
fi

# shellcheck source=scripts/harness-procs.sh
source "$repo/scripts/harness-procs.sh" objects-bench
out="${QUICGO_OUT:-$work/quicgo}"

echo "objects-bench: building the quic-go server and client into $out" >&2
if ! (cd "$repo/tests/peers/quicgo" && go build -o "$out/" ./cmd/server ./cmd/client); then
  echo "objects-bench: quicgo: go build failed (above); the quic-go client is needed against" \
    "every server, so nothing runs" >&2
  exit 2
fi

run_harness python3 "$repo/tests/interop/objects_bench.py" --quicgo-dir "$out" --pid-file "$pids" "$@"
