#!/usr/bin/env bash
# The recovery benchmark: recoup serve's loss-recovery policies next to quic-go, Caddy, quinn,
# aioquic and quiche, through `recoup link`, read by one quic-go client
# (tests/interop/recovery_bench.py says what it measures; docs/RECOVERY-BENCH.md is its report).
# Installs and builds the peers the chosen servers need, then runs the Python harness with
# every argument given here:
#
#   scripts/recovery-bench.sh --recoup BIN [--servers quicgo,caddy,recoup-autorec-bbr,...]
#       [--paths autorec,loss2,...] [--workloads live,segments,...] [--runs 5] [--duration 20s]
#       [--resume] [--report-only] [--quick] [--out results/recovery-bench] [--doc FILE]
#
# Peers: the quic-go server and client (tests/peers/quicgo, Go modules) are always built; quinn's
# h3-quinn-server with cargo (crates/recoup-interop, into $CARGO_TARGET_DIR); aioquic, Caddy and
# quiche by scripts/install-peers.sh. A peer that cannot be installed is named with its error in
# the report and skipped. Every process the harness starts is stopped on the way out, also on
# Ctrl-C or SIGTERM.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "recovery-bench: go not found: the quic-go client (used against every server) needs" \
    "Go $(sed -n 's/^go //p' "$repo/tests/peers/quicgo/go.mod") or newer" >&2
  exit 2
fi

# The servers asked for (the harness's default list, or --quick's two).
servers="quicgo,caddy,quinn,aioquic,quiche,recoup"
quick=0
prev=""
for a in "$@"; do
  case "$prev" in --servers) servers="$a" ;; esac
  case "$a" in
    --servers=*) servers="${a#--servers=}" ;;
    --quick) quick=1 ;;
  esac
  prev="$a"
done
if [[ $quick == 1 && " $* " != *" --servers"* ]]; then
  servers="quicgo,recoup"
fi
wants() { [[ ",$servers," == *",$1,"* ]]; }

# shellcheck source=scripts/harness-procs.sh
source "$repo/scripts/harness-procs.sh" recovery-bench

echo "recovery-bench: building the quic-go server and client" >&2
if ! (cd "$repo/tests/peers/quicgo" && go build -o "$work/quicgo/" ./cmd/server ./cmd/client); then
  echo "recovery-bench: quicgo: go build failed (above); the quic-go client is needed against" \
    "every server, so nothing runs" >&2
  exit 2
fi
extra=(--quicgo-dir "$work/quicgo" --pid-file "$pids" --peer-status "$work/peers")
: >"$work/peers"

if wants quinn; then
  target="${CARGO_TARGET_DIR:-$repo/target}"
  if cargo build --release --locked -p recoup-interop --bin h3-quinn-server \
    --manifest-path "$repo/Cargo.toml" 2>"$work/quinn.log"; then
    extra+=(--quinn-server "$target/release/h3-quinn-server")
  else
    printf 'quinn\terror\tcargo build -p recoup-interop failed: %s\n' \
      "$(grep -m3 error "$work/quinn.log" | tr '\n' ' ')" >>"$work/peers"
  fi
fi
install=()
for peer in aioquic caddy quiche; do
  wants "$peer" && install+=("$peer")
done
if [[ ${#install[@]} -gt 0 ]]; then
  bash "$repo/scripts/install-peers.sh" --status "$work/peers.install" "${install[@]}" || true
  cat "$work/peers.install" >>"$work/peers"
  if wants quiche; then
    extra+=(--quiche-server "${QUICHE_TARGET_DIR:-$repo/tests/peers/quiche/target}/release/quiche-h3-server")
  fi
fi

run_harness python3 "$repo/tests/interop/recovery_bench.py" "${extra[@]}" "$@"
