# Sourced by the scripts that play a MoQ broadcast in @moq/watch (moq-live.sh), from the
# repository's root:
#
#   source scripts/moq-deps.sh NAME
#
# Installs, when missing: Debian's ffmpeg (apt-get, as root), the MoQ relay and publisher of
# moq-dev/moq from crates.io (`cargo install moq-relay@MOQ_RELAY_VERSION moq-cli@MOQ_CLI_VERSION`,
# QUIC only: no iroh, no WebSocket) into $MOQ_ROOT (default: ~/.cache/recoup/moq-peers, kept
# across clones: building them takes minutes), and @moq/watch with esbuild (npm ci, web/moq/package-lock.json), then
# bundles web/moq/player.js into web/moq/dist/moq-player.js. NAME prefixes the error messages.
# After sourcing: $moq_relay and $moq_cli are the binaries, $moq_versions says which versions
# run, $moq_site is the directory to serve (page, style, bundle).
#
# The crates are installed without --locked: their published Cargo.lock names versions that the
# registry mirror reachable here does not have (webpki-roots 1.0.11), so their dependencies are
# resolved at install time; the two crates themselves are pinned.
MOQ_RELAY_VERSION=0.17.10
MOQ_CLI_VERSION=0.14.10
# shellcheck source=scripts/ffmpeg-deps.sh
source scripts/ffmpeg-deps.sh "$1"
moq_root=${MOQ_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/recoup/moq-peers}
moq_relay=$moq_root/bin/moq-relay
moq_cli=$moq_root/bin/moq
moq_installed() { # BINARY VERSION: whether BINARY --version says VERSION
    [[ -x $1 ]] && "$1" --version 2>/dev/null | grep -q -- " $2\$"
}
if ! moq_installed "$moq_relay" "$MOQ_RELAY_VERSION" || ! moq_installed "$moq_cli" "$MOQ_CLI_VERSION"; then
    command -v cargo >/dev/null 2>&1 || { echo "$1: cargo not found (needed for moq-relay)" >&2; exit 1; }
    echo "$1: installing moq-relay $MOQ_RELAY_VERSION and moq-cli $MOQ_CLI_VERSION into $moq_root" >&2
    moq_build=$(mktemp -d)
    if ! cargo install --quiet --root "$moq_root" --target-dir "$moq_build" \
        --no-default-features --features noq \
        "moq-relay@$MOQ_RELAY_VERSION" "moq-cli@$MOQ_CLI_VERSION"; then
        rm -rf "$moq_build"
        echo "$1: cargo install of moq-relay/moq-cli failed" >&2
        exit 1
    fi
    rm -rf "$moq_build"
fi
if [[ ! -d web/moq/node_modules/@moq/watch ]]; then
    command -v npm >/dev/null 2>&1 || { echo "$1: npm not found (needed for @moq/watch)" >&2; exit 1; }
    npm ci --prefix web/moq --no-audit --no-fund --loglevel=error >/dev/null
fi
moq_site=web/moq/dist
mkdir -p "$moq_site"
(cd web/moq && node_modules/.bin/esbuild player.js --bundle --format=esm --minify \
    --log-level=warning --outfile=dist/moq-player.js) || { echo "$1: bundling web/moq/player.js failed" >&2; exit 1; }
cp web/moq/index.html web/player.css "$moq_site/"
moq_watch_version=$(node -p "require('./web/moq/node_modules/@moq/watch/package.json').version")
moq_net_version=$(node -p "require('./web/moq/node_modules/@moq/net/package.json').version")
moq_versions="moq-relay $MOQ_RELAY_VERSION, moq-cli $MOQ_CLI_VERSION, @moq/watch $moq_watch_version (@moq/net $moq_net_version)"
