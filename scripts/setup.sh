#!/usr/bin/env bash
# Make .venv: Python 3.12, numpy, pybullet built against it, lerobot, the ROS 2 Jazzy wheels, this package.
# Idempotent: a finished venv is recognised by its stamp, which records what it was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
STAMP=$VENV/.act_node_ready
FINGERPRINT=$(cat requirements.txt requirements-ros.txt requirements-dev.txt setup.py scripts/setup.sh \
  plugins/lerobot_env_act_node/pyproject.toml | sha256sum | cut -d' ' -f1)

if [[ -f $STAMP && $(cat "$STAMP") == "$FINGERPRINT" ]]; then
  exit 0
fi

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.12; do
    if [[ -n $candidate ]] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      command -v "$candidate"; return
    fi
  done
  for candidate in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do
    if [[ -x $candidate ]]; then echo "$candidate"; return; fi
  done
  echo "setup: no Python 3.12 found (lerobot 0.6.1 needs >= 3.12); set PYTHON=/path/to/python3.12" >&2
  exit 1
}

started=$SECONDS
if [[ ! -x $VENV/bin/python ]]; then
  python=$(find_python)
  echo "setup: creating $VENV with $python"
  "$python" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)
# setuptools<80: colcon --symlink-install needs `setup.py develop` (requirements-dev.txt)
"${PIP[@]}" --quiet --upgrade pip "setuptools>=71,<80" wheel
# numpy first: pybullet's build picks up numpy only if it is already there (and only without isolation)
"${PIP[@]}" --quiet "$(grep -E '^numpy' requirements-ros.txt | cut -d' ' -f1)"
numpy_enabled() { "$VENV/bin/python" -c 'import pybullet, sys; sys.exit(0 if pybullet.isNumpyEnabled() else 1)' 2>/dev/null; }
if ! numpy_enabled; then
  echo "setup: building pybullet 3.2.7 with numpy (about 10 minutes the first time; pip caches the wheel)"
  "${PIP[@]}" --no-build-isolation "pybullet==3.2.7"
  if ! numpy_enabled; then  # a cached wheel built without numpy: build afresh
    "${PIP[@]}" --no-build-isolation --no-cache-dir --force-reinstall --no-deps "pybullet==3.2.7"
  fi
  numpy_enabled || { echo "setup: pybullet.isNumpyEnabled() is 0 after a fresh build" >&2; exit 1; }
fi
echo "setup: installing lerobot, the ROS 2 Jazzy wheels and the rest (torch is several GB the first time)"
"${PIP[@]}" --quiet -r requirements.txt -r requirements-dev.txt
"${PIP[@]}" --quiet --no-deps --no-build-isolation -e . -e plugins/lerobot_env_act_node
"$VENV/bin/python" -c 'import rclpy, lerobot, pybullet, act_node' >/dev/null
echo "$FINGERPRINT" > "$STAMP"
echo "setup: done in $((SECONDS - started)) s"
