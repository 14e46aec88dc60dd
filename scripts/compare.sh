#!/usr/bin/env bash
# The main job on a fresh machine: build recoup in release and compare the loss-recovery
# policies on AutoRec's testbed (or the scenario given). Arguments go to `recoup compare`, e.g.
#   bash scripts/compare.sh --seeds 3 --out results/quick
# Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (rustup) first" >&2
  exit 1
fi

# The plot is labelled with DejaVu Sans; without it the tables and CSVs are still written.
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
if [ ! -f "$FONT" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core >/dev/null) \
      || echo "fonts-dejavu-core could not be installed: compare.png will be skipped" >&2
  else
    echo "$FONT missing (install fonts-dejavu-core as root): compare.png will be skipped" >&2
  fi
fi

cargo build --release -p recoup-cli --locked
exec "${CARGO_TARGET_DIR:-target}/release/recoup" compare "$@"
