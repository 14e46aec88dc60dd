#!/usr/bin/env bash
# Builds a DASH video-on-demand site for `recoup serve --root OUT` (ART Fig. 25 in a real player):
# test media encoded here with Debian's ffmpeg, dash.js from the npm registry, and the player page
# web/dash/.
#
#   scripts/dash-site.sh OUT [--seconds 40]
#   recoup serve --root OUT ...      # then open https://HOST:PORT/index.html?mpd=media/manifest.mpd
#
# The media: ffmpeg's synthetic test pattern (testsrc2, 24 fps), VP9 in fragmented MP4 (a codec
# Chromium plays), 4 s segments as in the DASH dataset ART's §7.5 uses, and four rungs of that
# dataset's Big Buck Bunny ladder (recoup-apps' vod.rs BIG_BUCK_BUNNY[2, 8, 12, 15]). Nothing is
# downloaded but dash.js; installs ffmpeg (apt-get, as root) and dash.js (npm ci) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

out=
seconds=40
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        -*) echo "dash-site: unknown flag $1 (see --help)" >&2; exit 2 ;;
        *) [[ -z $out ]] || { echo "dash-site: one output directory, got $out and $1" >&2; exit 2; }
           out=$1; shift ;;
    esac
done
[[ -n $out ]] || { echo "dash-site: no output directory (usage: scripts/dash-site.sh OUT [--seconds N])" >&2; exit 2; }
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 4 || seconds % 4 != 0 )); then
    echo "dash-site: --seconds must be a multiple of the 4 s segment, at least 4; got $seconds" >&2
    exit 2
fi

# shellcheck source=scripts/dash-deps.sh
source scripts/dash-deps.sh dash-site

mkdir -p "$out/media"
cp web/dash/index.html web/dash/player.js web/player.css "$dashjs" "$out/"
# 4 s GOPs, one per segment, so that every segment starts with a key frame; constant bitrate
# (min = max = target) so that a segment's size follows its rung as in the simulator's VoD.
rungs=(128503:256x144 509091:480x270 1207152:640x360 2409742:854x480)
args=()
for i in "${!rungs[@]}"; do
    rate=${rungs[$i]%%:*}
    size=${rungs[$i]##*:}
    args+=(-map 0:v "-b:v:$i" "$rate" "-minrate:v:$i" "$rate" "-maxrate:v:$i" "$rate" "-s:v:$i" "$size")
done
ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=854x480:rate=24" -t "$seconds" \
    "${args[@]}" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -row-mt 1 -pix_fmt yuv420p \
    -g 96 -keyint_min 96 \
    -f dash -seg_duration 4 -use_template 1 -use_timeline 0 -dash_segment_type mp4 \
    -adaptation_sets "id=0,streams=v" "$out/media/manifest.mpd"
echo "dash-site: $out: $((seconds / 4)) segments x ${#rungs[@]} bitrates, dash.js $dashjs_version"
