#!/usr/bin/env bash
# Coverage-guided fuzzing of recoup's parsers and endpoints with cargo-fuzz (libFuzzer; nightly).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  how long each target runs (default 60)
#   TARGET   the targets to run (default: all of them, one after the other)
# A crashing target stops (the others still run, and the script fails at the end); libFuzzer
# leaves the input in fuzz/artifacts/<target>/. Reproduce
# with `cargo +nightly fuzz run <target> <file>`, fix it, and keep the input in
# fuzz/regressions/<target>/ so the stable replay test (crates/recoup-transport/tests/
# fuzz_replay.rs) checks it from then on. Not part of scripts/test.sh: CI runs the replay test.
# docs/FUZZING.md describes the targets and what was run.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-60}"
shift || true
if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || [ "$SECONDS_PER_TARGET" -eq 0 ]; then
  echo "fuzz.sh: SECONDS must be a positive whole number of seconds, not '$SECONDS_PER_TARGET'" >&2
  exit 2
fi

CARGO_FUZZ_VERSION=0.13.2
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2
  exit 1
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

cd fuzz
mapfile -t ALL < <(cargo +nightly fuzz list)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  if ! printf '%s\n' "${ALL[@]}" | grep -qx "$t"; then
    echo "fuzz.sh: no fuzz target '$t'; there are: ${ALL[*]}" >&2
    exit 2
  fi
done

# fuzz/Cargo.lock is committed: fail, rather than resolve anew, if it is out of date (cargo fuzz
# itself has no --locked). Debug assertions on: an arithmetic overflow is a finding too.
cargo +nightly metadata --locked --format-version 1 >/dev/null
cargo +nightly fuzz build --debug-assertions

FAILED=()
for t in "${TARGETS[@]}"; do
  echo "==> $t for ${SECONDS_PER_TARGET}s"
  # The seed corpus stays as committed: new inputs go to a scratch directory (ignored by git),
  # which is read too so repeated runs resume where they were.
  mkdir -p "work/$t"
  if ! cargo +nightly fuzz run --debug-assertions "$t" "work/$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1; then
    FAILED+=("$t")
  fi
done
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in ${FAILED[*]}; inputs in fuzz/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: ${#TARGETS[@]} targets ran ${SECONDS_PER_TARGET}s each without a crash"
