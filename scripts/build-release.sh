#!/usr/bin/env bash
# Builds the release `recoup` binary with profile-guided optimization (PGO): an instrumented
# build runs every scenario of scenarios/ for a few simulated seconds, and the release build
# is then optimized for the branches and calls those runs took. The simulator runs about a
# third faster per CPU second (BENCHMARKS.md, "Profile-guided optimization"); results are
# unchanged (a simulated run is a pure function of scenario and seed, whatever the code layout).
# Costs a second build of the dependency tree (about 5 more minutes on 2 cores).
#   bash scripts/build-release.sh [CARGO BUILD ARGS]   (e.g. --example speed -p recoup-sim)
# RECOUP_PGO=0 builds without PGO. Honours CARGO_TARGET_DIR. Without rustup's llvm-tools
# component (llvm-profdata), it says so and builds without PGO.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}

if [ "${RECOUP_PGO:-1}" = 0 ]; then
  exec cargo build --release --locked -p recoup-cli "$@"
fi

rustup component add llvm-tools >/dev/null 2>&1 || true
PROFDATA=$(find "$(rustc --print sysroot)/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -n 1)
if [ -z "$PROFDATA" ]; then
  echo "build-release: llvm-profdata not found (rustup component add llvm-tools): building without PGO" >&2
  exec cargo build --release --locked -p recoup-cli "$@"
fi

PGO=$TARGET/pgo
# A profile newer than every source, scenario and manifest is still this code's: reused.
if [ -f "$PGO/recoup.profdata" ] &&
  [ -z "$(find crates scenarios Cargo.toml Cargo.lock -newer "$PGO/recoup.profdata" -print -quit)" ]; then
  echo "build-release: reusing $PGO/recoup.profdata (no source changed since)" >&2
  RUSTFLAGS="-Cprofile-use=$(cd "$PGO" && pwd)/recoup.profdata" \
    exec cargo build --release --locked -p recoup-cli "$@"
fi
rm -rf "$PGO/raw" "$PGO/train" "$PGO/recoup.profdata"
mkdir -p "$PGO/raw" "$PGO/train"
RAW=$(cd "$PGO/raw" && pwd)
# The instrumented build has the release profile's settings: they name the symbols and code
# units the profile is keyed by (a build without LTO or with more units gives a profile that
# matches nothing, and no speed-up).
echo "build-release: instrumented build for the training runs" >&2
RUSTFLAGS="-Cprofile-generate=$RAW" CARGO_TARGET_DIR=$PGO \
  cargo build --release --locked -p recoup-cli --bin recoup
echo "build-release: training runs (every scenario of scenarios/, 10 simulated seconds, one seed)" >&2
for f in scenarios/*.toml; do
  "$PGO/release/recoup" run "$f" --seeds 1 --duration 10s --jobs 1 \
    --out "$PGO/train/$(basename "$f" .toml)" >/dev/null
done
"$PROFDATA" merge -o "$PGO/recoup.profdata" "$RAW"
echo "build-release: release build with the profile" >&2
RUSTFLAGS="-Cprofile-use=$(cd "$PGO" && pwd)/recoup.profdata" \
  cargo build --release --locked -p recoup-cli "$@"
