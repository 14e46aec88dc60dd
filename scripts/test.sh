#!/usr/bin/env bash
# Sets up everything the tests need and runs them all: formatting, lints, the Rust test suite.
# Used by CI (.ci/run) and by developers; safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (rustup) first" >&2
  exit 1
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true
cargo --version

step "qlog schema check: jsonschema (PyPI)"
# crates/recoup-net/tests/qlog_pair.rs checks real traces with tests/qlog/validate.py.
python3 -m pip install --quiet --disable-pip-version-check "jsonschema==4.26.0"

step "interop peers: aioquic (PyPI), tshark (Debian)"
# The interop tests (crates/recoup-cli/tests/interop.rs) run the unmodified aioquic client and
# server; they fail loudly if aioquic is missing. tshark is optional: its test skips with a
# message when tshark is absent or cannot capture on loopback.
# scripts/install-peers.sh pins its version (the recovery benchmark installs it the same way).
bash scripts/install-peers.sh aioquic
if ! command -v tshark >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null) \
      || echo "tshark could not be installed: its test will be skipped"
  else
    echo "tshark not installed (needs root for apt-get): its test will be skipped"
  fi
fi
command -v tshark >/dev/null 2>&1 && tshark --version | head -1

step "browser: Debian's chromium (the HTTP/3 live player test)"
# crates/recoup-cli/tests/browser.rs plays a live stream from recoup serve in headless Chromium
# over HTTP/3; it fails, with a message, if chromium is missing.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium not installed (needs root for apt-get): the browser test will fail" >&2
  fi
fi
command -v chromium >/dev/null 2>&1 && chromium --version 2>/dev/null | tail -1

step "metrics: Debian's prometheus (scrapes recoup serve --metrics)"
# crates/recoup-cli/tests/prometheus.rs starts prometheus on loopback, lets it scrape recoup
# serve's metrics and checks them against the server's qlog; it fails, with a message, if
# prometheus is missing.
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "prometheus not installed (needs root for apt-get): the metrics test will fail" >&2
  fi
fi
command -v prometheus >/dev/null 2>&1 && prometheus --version 2>&1 | head -1

step "DASH player: ffmpeg (Debian) for the test media, dash.js (npm)"
# crates/recoup-cli/tests/dash_player.rs plays a presentation made by scripts/dash-site.sh
# (ffmpeg encodes it) with dash.js (web/dash/package-lock.json) in headless Chromium.
apt_missing=()
command -v ffmpeg >/dev/null 2>&1 || apt_missing+=(ffmpeg)
command -v npm >/dev/null 2>&1 || apt_missing+=(nodejs npm)
if [ ${#apt_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null
  else
    echo "${apt_missing[*]} not installed (needs root for apt-get): the DASH test will fail" >&2
  fi
fi
npm ci --prefix web/dash --no-audit --no-fund --loglevel=error
ffmpeg -hide_banner -version | head -1

step "MoQ: moq-relay and moq-cli (crates.io), @moq/watch (npm)"
# crates/recoup-cli/tests/moq_live.rs plays an ffmpeg broadcast published by moq-cli on
# moq-relay, relayed by recoup serve --moq, in @moq/watch (scripts/moq-deps.sh installs them,
# the crates once into a cache outside the clone).
(source scripts/moq-deps.sh test && echo "$moq_versions")

step "C compiler (the C ABI test compiles a C host)"
if ! command -v cc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
  else
    echo "no C compiler (cc) and no root to install gcc: the C ABI test will fail" >&2
  fi
fi
cc --version | head -1

step "fonts for plots (Debian fonts-dejavu-core)"
# recoup compare labels compare.png with DejaVu Sans; without it the plot is skipped.
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core >/dev/null) \
      || echo "fonts-dejavu-core could not be installed: compare.png will be skipped"
  else
    echo "fonts-dejavu-core not installed (needs root for apt-get): compare.png will be skipped"
  fi
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "cargo doc (warnings are errors: broken intra-doc links, bad doc markup)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "interop matrix (tests/interop/matrix.py; table in docs/INTEROP.md)"
# The QUIC interop runner's cases against aioquic and quinn, through recoup link, checked from
# decrypted captures (tshark, installed above; the matrix refuses to run without it). Exits
# non-zero if a run fails; a peer's unsupported case is not a failure.
# The whole workspace, as cargo test built it: building two packages alone unifies other
# features and compiles much of the tree a second time.
cargo build --workspace --bins --locked
# recoup serve runs two workers (SO_REUSEPORT, connection IDs naming their worker), so the
# rebinding and migration cases also cross workers whatever the machine's core count.
python3 tests/interop/matrix.py --bin "${CARGO_TARGET_DIR:-target}/debug" --jobs 2 \
  --serve-flags "--workers 2"

step "python package recoup: build (maturin), pytest, ruff"
# The recoup package (pyproject.toml, python/recoup) wraps crates/recoup-py. Its tests compare
# the local and Ray sweep backends, draw plots and read Parquet back, so they need these packages.
python3 -m pip install --quiet --disable-pip-version-check \
  "maturin==1.16.0" "pytest==9.2.0" "pandas==3.1.1" "matplotlib==3.11.2" "ray==2.60.0" "ruff==0.17.6" "pyarrow==25.0.1"
wheel_dir="$(mktemp -d)"
trap 'rm -rf "$wheel_dir"' EXIT
python3 -m maturin build --release --locked -m crates/recoup-py/Cargo.toml -i python3 -o "$wheel_dir"
python3 -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel_dir"/recoup-*.whl
python3 -m ruff check python experiments tests/interop tests/qlog
python3 -m ruff format --check python experiments tests/interop tests/qlog
python3 -m pytest -q python/tests

step "objects benchmark against quic-go, smoke form (scripts/objects-bench.sh --quick)"
# 12 KB objects at 10/s from quic-go's HTTP/3 server and recoup serve through recoup link at 2 %
# loss, one 5 s run each: the benchmark's Go peer builds (Go modules) and every server it names
# is measured (it reads its statistics helpers from experiments/common.py, so it runs after the
# Python packages above). The measurement itself is a script (docs/OBJECTS-BENCH.md), not a test.
if command -v go >/dev/null 2>&1; then
  bash scripts/objects-bench.sh --recoup "${CARGO_TARGET_DIR:-target}/debug/recoup" --quick \
    --out "$(mktemp -d)"
else
  echo "go not found: the objects benchmark's quic-go peer cannot be built" >&2
  exit 1
fi

step "recovery benchmark, smoke form (scripts/recovery-bench.sh --quick)"
# A 1 Mbit/s live stream from the HTTP/1.1 origin relayed by quic-go's server and by recoup serve
# (autorec, BBR), and 0.5 s segments from both, through recoup link at 2 % loss, one 5 s run
# each, read by the quic-go client: the harness, the origin, the relays and the per-frame
# measurement work end to end, and a frame or segment that never arrives fails it. The measurement itself is a script
# (docs/RECOVERY-BENCH.md), not a test.
bash scripts/recovery-bench.sh --recoup "${CARGO_TARGET_DIR:-target}/debug/recoup" --quick \
  --out "$(mktemp -d)"
