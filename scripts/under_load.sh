#!/usr/bin/env bash
# Runs a command on a busy machine: N CPU hogs (default 2, one per core of
# our 2-core class) spin beside it for its whole duration and stop with it,
# as a shared CI runner or a developer's laptop is busy. The command's exit
# code is returned.
#
#   scripts/under_load.sh [--hogs N] command [arguments...]
#   scripts/under_load.sh ./dev test
#   scripts/under_load.sh bash .ci/run
set -uo pipefail
hogs=2
if [ "${1:-}" = "--hogs" ]; then
  hogs=$2
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: scripts/under_load.sh [--hogs N] command [arguments...]" >&2; exit 2; }

pids=()
stop_hogs() {
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for _ in $(seq "$hogs"); do
  python3 -c "while True: pass" &
  pids+=($!)
done
echo "[under_load] $hogs CPU hogs running (pids ${pids[*]}) beside: $*"
started=$(date +%s)
"$@"
status=$?
echo "[under_load] exit code $status after $(( $(date +%s) - started )) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
