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

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked
