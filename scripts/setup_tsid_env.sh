#!/usr/bin/env bash
# The TSID oracle of test_whole_body_control.py in an environment of its own,
# .venv-tsid (tests skip without it): tsid 1.10.0's wheels are built against
# Pinocchio 4.0.0 and crash (free(): invalid pointer) beside the suite's pin
# 4.1.0, and libtsid 1.10.0 is on PyPI only as a cp314-tagged wheel of a C++
# library, installed here retagged py3-none. Usage: scripts/setup_tsid_env.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
env="$root/.venv-tsid"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$env"
"$env/bin/pip" install --quiet wheel==0.45.1
"$env/bin/pip" download --quiet --no-deps --only-binary=:all: --python-version 3.14 --implementation cp \
  --abi cp314 --platform manylinux_2_28_x86_64 -d "$tmp" libtsid==1.10.0
"$env/bin/python" -m wheel tags --remove --python-tag py3 --abi-tag none "$tmp"/libtsid-1.10.0-*.whl >/dev/null
"$env/bin/pip" install --quiet "$tmp"/libtsid-1.10.0-*-py3-none-*.whl tsid==1.10.0 eiquadprog==1.3.2 pin==4.0.0 \
  libpinocchio==4.0.0 cmeel-boost==1.90.0 numpy==2.4.6
"$env/bin/python" -c 'import tsid, pinocchio; print("TSID oracle environment:", pinocchio.__version__)'
