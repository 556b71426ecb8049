#!/usr/bin/env bash
# Wheels for the GPU machine (issue 26). It has CUDA torch, numpy, scipy, matplotlib, rich, psutil, pyyaml,
# pytest and pytest-xdist, but no network. This fetches, here, what a run and the test suite import beyond
# those: for its Python 3.12 on x86-64, at the versions this machine's environment has (the CPU results' own),
# into .whl/ (git-ignored), 49 MB of the 64 MiB that travels with a call (the repository is another 11 MiB).
# Videos are left out: moviepy needs imageio-ffmpeg, 68 MB alone (the video tests skip without them); so is
# PyOpenGL (3 MB), which MuJoCo imports only to render (MUJOCO_GL=disable there: the suite passed without it).
#
#   here:  bash tests/gpu_wheels.sh [python] [runs]     (python: the environment to read versions from; .venv's by
#          default; runs: only what a run without --track imports, 26 MB, for a call that runs no tests: the
#          repository is 20 MiB now (its kept runs), and with W&B's wheels the call would pass 64 MiB)
#   there: python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#          && export PYTHONPATH=/tmp/site MUJOCO_GL=disable     (no EGL library there: importing MuJoCo fails)
#          && DAU_TEST_DEVICE=cuda python3 -m pytest -n 14     (docs/common.md, "On a GPU")
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
# What the runs import (gymnasium, MuJoCo, Box2D, tyro, wandb for --track and the offline-W&B tests), then
# what those need that the GPU machine lacks (its package list: the device tool's KINDS.md), as found by
# importing them there: Gymnasium's MuJoCo envs import glfw, its Box2D envs pygame. mujoco-studio (12 MB, the
# viewer) is left out: `import mujoco` goes without it.
packages="gymnasium farama-notifications mujoco mujoco-core glfw Box2D pygame-ce tyro docstring-parser
  typeguard"
wandb_packages="wandb pydantic pydantic-core annotated-types typing-inspection platformdirs cwevals distro sniffio
  googleapis-common-protos
  opentelemetry-api opentelemetry-sdk opentelemetry-proto opentelemetry-semantic-conventions
  opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-common
  opentelemetry-exporter-otlp-common opentelemetry-exporter-http-transport"
[ "${2:-}" = runs ] || packages="$packages $wandb_packages"
pinned=$("$python" - $packages <<'EOF'
import importlib.metadata
import sys

print(" ".join(f"{name}=={importlib.metadata.version(name)}" for name in sys.argv[1:]))
EOF
)
rm -rf .whl
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl $pinned
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >>.git/info/exclude
du -sh .whl
