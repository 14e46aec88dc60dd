# Sourced by the scripts whose players watch an ffmpeg encoding (dash-deps.sh, moq-deps.sh),
# from the repository's root:
#
#   source scripts/ffmpeg-deps.sh NAME
#
# Installs Debian's ffmpeg (apt-get, as root) when missing; NAME prefixes the error message.
if ! command -v ffmpeg >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg >/dev/null
    else
        echo "$1: ffmpeg not found (Debian: apt-get install ffmpeg, as root)" >&2
        exit 1
    fi
fi
