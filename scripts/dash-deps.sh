# Sourced by the scripts that play DASH in dash.js (dash-site.sh, live-cdn.sh), from the
# repository's root:
#
#   source scripts/dash-deps.sh NAME
#
# Installs Debian's ffmpeg (apt-get, as root) and dash.js (npm ci, web/dash/package-lock.json)
# when missing; NAME prefixes the error messages. After sourcing, $dashjs is the path of
# dash.all.min.js and $dashjs_version its version.
# shellcheck source=scripts/ffmpeg-deps.sh
source scripts/ffmpeg-deps.sh "$1"
dashjs=web/dash/node_modules/dashjs/dist/modern/umd/dash.all.min.js
if [[ ! -f $dashjs ]]; then
    command -v npm >/dev/null 2>&1 || { echo "$1: npm not found (needed for dash.js)" >&2; exit 1; }
    npm ci --prefix web/dash --no-audit --no-fund --loglevel=error >/dev/null
fi
dashjs_version=$(node -p "require('./web/dash/node_modules/dashjs/package.json').version")
