#!/usr/bin/env bash
# Sets up .venv at the repository root, where ROS 2 comes from PyPI:
#   1. the core's dependencies (numpy, scipy, numba, ...), then the
#      mbs_dynamics Python package with its console scripts and its launch/
#      and config/ files under .venv/share/mbs_dynamics;
#   2. in the background from there on, the compiled kernels the nodes use,
#      into numba's cache (so that no node stalls on first use); with --test,
#      all the other kernels too;
#   3. meanwhile the ROS 2 kilted wheels and the other dependencies, at the
#      exact versions of constraints.txt (with --test, the test oracles);
#   4. mbs_dynamics_interfaces, compiled by its own CMake + rosidl build,
#      driven from pip (scikit-build-core), installed into the venv prefix
#      (only what rclpy loads: no C++ typesupports; colcon builds them all);
#   5. then it waits for the kernels.
# Each step runs again only when its inputs changed (stamps in .venv/.stamps).
#
# Usage: scripts/setup_venv.sh [--test]   (--test adds the test oracles)
set -euo pipefail
started=$(date +%s) changed=0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
stamps="$venv/.stamps"
with_test=0
[ "${1:-}" = "--test" ] && with_test=1

# each line with the seconds since the set-up started
say() { printf '\033[1m[setup]\033[0m %3d s  %s\n' $(( $(date +%s) - started )) "$*"; }
die() { printf '\033[1;31m[setup] %s\033[0m\n' "$*" >&2; exit 1; }

# --- prerequisites: Python 3.10-3.13 with venv, CMake >= 3.16, a C++ compiler
python=${PYTHON:-python3}
missing=()
command -v "$python" >/dev/null || missing+=(python3)
"$python" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null; }; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    say "installing ${missing[*]} with apt-get"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    die "missing ${missing[*]}: install them (Debian/Ubuntu: sudo apt-get install ${missing[*]})"
  fi
fi
"$python" - <<'EOF' || die "need CPython 3.10-3.13 on x86_64 (the ROS 2 wheels exist only there); set PYTHON=/path/to/python3.X"
import platform, sys
assert (3, 10) <= sys.version_info[:2] <= (3, 13) and platform.machine() == "x86_64"
EOF

# --- the venv
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  "$python" -m venv "$venv"
  changed=1
fi
mkdir -p "$stamps"
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Every install is held to constraints.txt; builds run without isolation, in
# this environment, so nothing is resolved outside it.
# While the kernels compile (the longest step, on one core), the installs and
# the interfaces' build run below them ($lower).
# pip byte-compiles every module it installs (about 15 CPU-s of a fresh set-up,
# while both cores are busy); Python compiles the few that are imported, when
# they first are, unless told not to write bytecode (PYTHONDONTWRITEBYTECODE:
# then pip compiles them all, once).
lower=""
no_compile=--no-compile
[ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && no_compile=""
pip_install() {
  $lower "$py" -m pip install --quiet --no-warn-script-location $no_compile -c "$root/constraints.txt" "$@"
}
# What comes from the package index, uv installs when the venv has it (the core's dependencies first: uv,
# pinned in constraints.txt, then the rest with it): parallel downloads and unpacking in native code, 2-3
# CPU-s where pip took 19 for the core (one core before the kernels start compiling) and 21 for the ROS 2
# wheels. pip installs where uv is not there, fails (it reads no pip configuration: an index of pip.conf), or
# SETUP_INSTALLER=pip; pip builds the two local packages either way. uv keeps its cache of its own (uv cache dir).
uv_compile=""
[ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && uv_compile=--compile-bytecode
install_requirements() {
  if [ "${SETUP_INSTALLER:-uv}" != pip ] && [ -x "$venv/bin/uv" ]; then
    $lower "$venv/bin/uv" pip install --quiet --python "$py" $uv_compile -c "$root/constraints.txt" "$@" && return
    say "uv could not install $*: pip tries"
  fi
  pip_install "$@"
}

# stale NAME "input files...": true unless the stamp NAME records the same
# hash of the inputs (left in $hash for `stamp`).
stale() {
  hash=$(cd "$root" && find $2 -type f -not -path '*/__pycache__/*' -print0 \
         | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  ! { [ -f "$stamps/$1" ] && [ "$(cat "$stamps/$1")" = "$hash" ]; }
}
stamp() { echo "$2" > "$stamps/$1"; }

# Runs "$@" unless the stamp NAME records the same hash of the given inputs.
#   step NAME "input files..." command...
step() {
  local name=$1 inputs=$2; shift 2
  if stale "$name" "$inputs"; then
    local inputs_hash=$hash
    "$@"
    stamp "$name" "$inputs_hash"
    changed=1
  fi
}

install_core_dependencies() {
  say "installing the core's dependencies (numpy, scipy, numba, ...; pinned in constraints.txt)"
  [ "${SETUP_INSTALLER:-uv}" = pip ] || pip_install uv || say "no uv: pip installs"
  install_requirements pip setuptools wheel -r "$root/requirements/core.txt"
}

install_dependencies() {
  say "installing ROS 2 kilted wheels and the other dependencies (pinned in constraints.txt)"
  install_requirements -r "$root/requirements/runtime.txt" -r "$root/requirements/build.txt"
}

install_test_dependencies() {
  say "installing test tools and oracles (pytest, Pinocchio, MuJoCo, example-robot-data)"
  install_requirements -r "$root/requirements/test.txt"
}

install_tsid_oracle() {
  say "installing the TSID oracle in .venv-tsid (its own Pinocchio: scripts/setup_tsid_env.sh)"
  $lower bash "$root/scripts/setup_tsid_env.sh"
}

install_interfaces() {
  say "building mbs_dynamics_interfaces (CMake + rosidl: the C and Python interfaces rclpy loads)"
  # pip's CMake build runs make serially where there is no ninja: one job per core
  CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    pip_install --no-build-isolation --no-deps --force-reinstall \
      --config-settings=cmake.define.MBS_INTERFACES_PYTHON_ONLY=ON "$root/mbs_dynamics_interfaces"
}

install_package() {
  say "installing mbs_dynamics"
  # Build from a copy: setuptools writes build/ and *.egg-info next to
  # setup.py, which would otherwise land in the source tree.
  local tmp installed
  # numba caches compiled kernels next to their sources and keys them on that
  # file alone, not on the helpers inlined into them: start from no cache.
  installed=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/mbs_dynamics
  rm -rf "$installed"
  tmp=$(mktemp -d)
  cp -r "$root/mbs_dynamics" "$tmp/"
  pip_install --no-build-isolation --no-deps --force-reinstall "$tmp/mbs_dynamics"
  rm -rf "$tmp"
  # where ROS looks for a package's executables (launch_ros's Node, `ros2 run`): <prefix>/lib/<package>/
  mkdir -p "$venv/lib/mbs_dynamics"
  for executable in inverse_dynamics_node dynamics_server_node simulator_node; do
    ln -sf "../../bin/$executable" "$venv/lib/mbs_dynamics/$executable"
  done
}

# The kernels compile in the background, in a session of their own (stopped
# with the set-up), while the rest installs: numba needs only the core.
warmup_pid=""
warmup_log="$venv/.warmup.log"
start_warmup() {
  if [ "${1:-}" = --all ]; then
    say "compiling all the kernels in the background, for the tests (numba cache, one process per core)"
  else
    say "compiling the kernels the nodes use in the background (numba cache, one process per core)"
  fi
  setsid "$py" -m mbs_dynamics.warmup --verbose "$@" > "$warmup_log" 2>&1 &
  warmup_pid=$! lower="nice -n 10"
  trap 'kill -- -$warmup_pid 2>/dev/null || true' EXIT
}
finish_warmup() {
  say "waiting for the kernels"
  if ! wait "$warmup_pid"; then
    cat "$warmup_log" >&2
    die "compiling the kernels failed (above)"
  fi
  trap - EXIT
  lower=""
  cat "$warmup_log"
}

step core-dependencies "constraints.txt requirements/core.txt" install_core_dependencies
package_inputs="scripts/setup_venv.sh constraints.txt mbs_dynamics/setup.py mbs_dynamics/setup.cfg mbs_dynamics/package.xml mbs_dynamics/mbs_dynamics mbs_dynamics/launch mbs_dynamics/config mbs_dynamics/resource"
package_hash="" kernels_hash=""
if stale package "$package_inputs"; then
  package_hash=$hash changed=1
  install_package
  rm -f "$stamps/kernels"  # the cache is gone: --test compiles the rest again
  [ $with_test = 1 ] && kernels_hash=$hash
elif [ $with_test = 1 ] && stale kernels "$package_inputs"; then
  kernels_hash=$hash changed=1
fi
if [ -n "$kernels_hash" ]; then
  start_warmup --all
elif [ -n "$package_hash" ]; then
  start_warmup
fi
step dependencies "constraints.txt requirements/core.txt requirements/runtime.txt requirements/build.txt" \
  install_dependencies
if [ $with_test = 1 ]; then
  step test-dependencies "constraints.txt requirements/test.txt" install_test_dependencies
  step tsid-oracle "scripts/setup_tsid_env.sh" install_tsid_oracle
fi
step interfaces "scripts/setup_venv.sh constraints.txt mbs_dynamics_interfaces" install_interfaces
if [ -n "$warmup_pid" ]; then
  finish_warmup
  [ -n "$package_hash" ] && stamp package "$package_hash"
  [ -n "$kernels_hash" ] && stamp kernels "$kernels_hash"
fi
if [ $changed = 1 ]; then
  # and the CPU it used (its processes', user + system: both cores are busy from the warm-up's start, so on
  # two idle cores it takes about half that; on a busy machine the wall-clock time is mostly waiting)
  times > "$stamps/.times"  # (in this shell: a subshell's `times` has no children)
  cpu=$(awk 'END { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
        "$stamps/.times")
  rm -f "$stamps/.times"
  say "set up in $(( $(date +%s) - started )) s ($cpu CPU-s)"
fi
