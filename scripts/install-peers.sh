#!/usr/bin/env bash
# Installs the third-party QUIC peers the benchmarks and interop tests run, each at a pinned
# version, and says for each one whether it is there:
#
#   scripts/install-peers.sh [--status FILE] aioquic caddy quiche
#
#   aioquic   aioquic's library (PyPI) for the interop tests and its HTTP/3 server
#   caddy     Debian's caddy package (HTTP/3 over quic-go) with apt-get; needs root
#   quiche    quiche-h3-server (tests/peers/quiche, a Cargo project of ours around crates.io's
#             quiche, whose BoringSSL build needs cmake and libclang; both come from apt-get
#             when missing), built into $QUICHE_TARGET_DIR (default: tests/peers/quiche/target).
#
# A peer that cannot be installed is reported with its error and the others go on; with
# --status FILE each peer gets one line `NAME<TAB>ok<TAB>VERSION` or `NAME<TAB>error<TAB>WHY`,
# which tests/interop/recovery_bench.py reads to list a missing peer as skipped. The exit status
# is non-zero if any peer is missing.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
AIOQUIC_VERSION=1.7.2

status=""
if [[ "${1:-}" == "--status" ]]; then
  status="$2"
  shift 2
  : >"$status"
fi
failed=0

report() { # NAME ok|error TEXT
  local text
  text="$(printf '%s' "$3" | tr '\t\n' '  ' | tail -c 1500)"
  if [[ "$2" == ok ]]; then
    echo "install-peers: $1: $text" >&2
  else
    echo "install-peers: $1 NOT INSTALLED: $text" >&2
    failed=1
  fi
  [[ -n "$status" ]] && printf '%s\t%s\t%s\n' "$1" "$2" "$text" >>"$status"
  return 0
}

apt_install() { # PACKAGE...: prints apt-get's error on failure
  if [[ "$(id -u)" != 0 ]]; then
    echo "apt-get needs root (running as uid $(id -u))"
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get on this machine"
    return 1
  fi
  local log
  log="$(mktemp)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } \
    >"$log" 2>&1; then
    tail -n 5 "$log"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

install_aioquic() {
  local out
  if ! python3 -c "import aioquic, sys; sys.exit(aioquic.__version__ != '$AIOQUIC_VERSION')" \
    2>/dev/null; then
    if ! out="$(python3 -m pip install --quiet --disable-pip-version-check \
      "aioquic==$AIOQUIC_VERSION" 2>&1)"; then
      report aioquic error "pip install aioquic==$AIOQUIC_VERSION failed: $out"
      return
    fi
  fi
  report aioquic ok "aioquic $(python3 -c 'import aioquic; print(aioquic.__version__)')"
}

install_caddy() {
  local out
  if ! command -v caddy >/dev/null 2>&1; then
    if ! out="$(apt_install caddy 2>&1)"; then
      report caddy error "apt-get install caddy failed: $out"
      return
    fi
  fi
  # The Debian service would hold port 443 and the benchmark starts its own instances.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet caddy 2>/dev/null; then
    systemctl stop caddy >/dev/null 2>&1 || true
  fi
  report caddy ok "caddy $(caddy version 2>&1 | head -1) (Debian $(dpkg-query -W -f='${Version}' caddy 2>/dev/null))"
}

install_quiche() {
  local dir="$repo/tests/peers/quiche" log out
  local target="${QUICHE_TARGET_DIR:-$dir/target}"
  if [[ ! -f "$dir/Cargo.toml" ]]; then
    report quiche error "$dir is missing"
    return
  fi
  if ! command -v cmake >/dev/null 2>&1; then
    if ! out="$(apt_install cmake 2>&1)"; then
      report quiche error "cmake (BoringSSL's build) is missing and apt-get install cmake failed: $out"
      return
    fi
  fi
  # boring-sys generates its bindings with bindgen, which loads libclang at build time.
  if ! ldconfig -p 2>/dev/null | grep -qE 'libclang(-[0-9.]+)?\.so'; then
    if ! out="$(apt_install libclang-dev 2>&1)"; then
      report quiche error "libclang (bindgen, for BoringSSL's bindings) is missing and apt-get install libclang-dev failed: $out"
      return
    fi
  fi
  log="$(mktemp)"
  if ! CARGO_TARGET_DIR="$target" cargo build --release --locked --manifest-path "$dir/Cargo.toml" \
    >"$log" 2>&1; then
    report quiche error "cargo build of tests/peers/quiche failed: $(grep -E 'error|CMake|cmake' "$log" | head -n 8)"
    rm -f "$log"
    return
  fi
  rm -f "$log"
  report quiche ok "$("$target/release/quiche-h3-server" --version 2>&1 | head -1)"
}

for peer in "$@"; do
  case "$peer" in
    aioquic) install_aioquic ;;
    caddy) install_caddy ;;
    quiche) install_quiche ;;
    *) report "$peer" error "unknown peer (aioquic, caddy, quiche)" ;;
  esac
done
exit "$failed"
