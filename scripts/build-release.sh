#!/usr/bin/env bash
# Builds the release `recoup` binary with profile-guided optimization (PGO): an instrumented
# build runs every scenario of scenarios/ and every policy for a few simulated seconds and a
# loopback download, and the release build is then optimized for the branches and calls those
# runs took. The simulator runs about a
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
  exec cargo build --release --locked -p recoup-cli --bin recoup "$@"
fi

rustup component add llvm-tools >/dev/null 2>&1 || true
PROFDATA=$(find "$(rustc --print sysroot)/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -n 1)
if [ -z "$PROFDATA" ]; then
  echo "build-release: llvm-profdata not found (rustup component add llvm-tools): building without PGO" >&2
  exec cargo build --release --locked -p recoup-cli --bin recoup "$@"
fi

# Both builds build the same targets with the release profile's settings: the profile is keyed
# by symbol names, which hash the crates' features and settings (extra examples bring their
# dev-dependencies' features; a build without LTO or with more code units matches nothing).
BUILD=(cargo build --release --locked -p recoup-cli --bin recoup "$@")
PGO=$TARGET/pgo
# A profile for the same targets, newer than every source, scenario, manifest and this script:
# reused.
if [ -f "$PGO/recoup.profdata" ] && [ "$(cat "$PGO/targets" 2>/dev/null)" = "$*" ] &&
  [ -z "$(find crates scenarios Cargo.toml Cargo.lock scripts/build-release.sh -newer "$PGO/recoup.profdata" -print -quit)" ]; then
  echo "build-release: reusing $PGO/recoup.profdata (no source changed since)" >&2
  RUSTFLAGS="-Cprofile-use=$(cd "$PGO" && pwd)/recoup.profdata" exec "${BUILD[@]}"
fi
rm -rf "$PGO/raw" "$PGO/train" "$PGO/recoup.profdata"
mkdir -p "$PGO/raw" "$PGO/train"
RAW=$(cd "$PGO/raw" && pwd)
echo "build-release: instrumented build for the training runs" >&2
RUSTFLAGS="-Cprofile-generate=$RAW" CARGO_TARGET_DIR=$PGO "${BUILD[@]}"
echo "build-release: training runs (every scenario of scenarios/ and every policy for 10 simulated" \
  "seconds; a loopback download over HTTP/3 and hq-interop)" >&2
# The policies no file of scenarios/ names run too, on the default scenario's path and
# application: code a training run never reaches is laid out as cold (ladr-rrl's decisions took
# 36 ns instead of 31 before it was here). art-dqn needs trained weights and stays out.
sed '/^\[\[policy\]\]/,$d' scenarios/default.toml >"$PGO/train/policies.toml"
cat >>"$PGO/train/policies.toml" <<'TOML'
[[policy]]
name = "fixed"
params = "r=2"
[[policy]]
name = "art-mab"
[[policy]]
name = "ladr-rrl"
[[policy]]
name = "crest"
TOML
for f in scenarios/*.toml "$PGO/train/policies.toml"; do
  "$PGO/release/recoup" run "$f" --seeds 1 --duration 10s --jobs 1 \
    --out "$PGO/train/$(basename "$f" .toml)" >/dev/null
done
# The real-time path (sockets, the driver, the HTTP layers) runs in `recoup serve` and `get`.
mkdir -p "$PGO/train/www"
head -c 50000000 /dev/urandom >"$PGO/train/www/file.bin"
"$PGO/release/recoup" serve --listen 127.0.0.1:0 --root "$PGO/train/www" >"$PGO/train/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 100); do
  grep -q 'listening on' "$PGO/train/serve.log" && break
  sleep 0.1
done
ADDR=$(grep -oE '127\.0\.0\.1:[0-9]+' "$PGO/train/serve.log" | head -n 1)
for alpn in h3 hq-interop; do
  "$PGO/release/recoup" get --insecure --alpn "$alpn" --timeout 60s "https://$ADDR/file.bin" \
    -o "$PGO/train/got.bin" >/dev/null 2>&1 || echo "build-release: training download ($alpn) failed" >&2
done
# Ctrl-C ends the server normally, so it writes its counts.
kill -INT "$SERVE"
wait "$SERVE" || true
"$PROFDATA" merge -o "$PGO/recoup.profdata" "$RAW"
echo "$*" >"$PGO/targets"
echo "build-release: release build with the profile" >&2
RUSTFLAGS="-Cprofile-use=$(cd "$PGO" && pwd)/recoup.profdata" "${BUILD[@]}"
