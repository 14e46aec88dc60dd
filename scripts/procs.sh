# Sourced by the benchmark scripts that start servers and relays (soak.sh, viewers.sh,
# policy-share.sh): a work directory and the processes started, both cleaned up on exit, and
# the address a started `recoup serve` or `recoup link` prints.
#
# After sourcing: $work is a fresh temporary directory; append each started process's pid to
# `pids`. Every one is killed, and $work removed, when the script exits.

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The address that the process writing $work/NAME.out printed ("listening on ADDR"); its
# $work/NAME.err is shown, and the script stops, if it does not print one within 15 s.
address_of() {
    for _ in $(seq 150); do
        if grep -q "^listening on " "$work/$1.out" 2>/dev/null; then
            sed -n 's/^listening on //p' "$work/$1.out" | head -1
            return
        fi
        sleep 0.1
    done
    echo "$1 did not start:" >&2
    cat "$work/$1.err" >&2
    exit 1
}
