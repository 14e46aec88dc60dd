# Sourced by the benchmark scripts whose Python harness starts servers and links, each the
# leader of its own process group (objects-bench.sh, recovery-bench.sh):
#
#   source scripts/harness-procs.sh NAME
#
# After sourcing: $work is a fresh temporary directory (named after NAME) and $pids the file
# in which the harness lists the process groups it has running (pass it as --pid-file).
# `run_harness CMD...` runs the harness in the background and waits for it. On the way out,
# also on Ctrl-C or SIGTERM, the harness is stopped (it stops what it started), whatever it
# left running because it was killed outright is killed, and $work is removed.
work="$(mktemp -d -t "$1.XXXXXX")"
pids="$work/pids"
harness=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$harness" ]] && kill -0 "$harness" 2>/dev/null; then
    kill -TERM "$harness" 2>/dev/null || true
    wait "$harness" 2>/dev/null || true
  fi
  if [[ -s "$pids" ]]; then
    while read -r pid; do
      kill -KILL -- "-$pid" 2>/dev/null || true
    done <"$pids"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_harness() {
  "$@" &
  harness=$!
  wait "$harness"
}
