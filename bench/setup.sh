#!/usr/bin/env bash
# Makes what the benchmarks need beyond scripts/setup.sh: a virtual environment
# in bench/.venv that sees Debian's python3 packages (torch, onnx, numpy) and
# adds the onnxruntime wheel from PyPI, which Debian does not package.
# Idempotent: does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
missing=()
for p in python3-venv python3-pip python3-protobuf; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench/setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

venv=bench/.venv
py=$venv/bin/python
if [ -x "$py" ] && "$py" -c "import onnxruntime, onnx, torch, numpy" 2>/dev/null; then
  exit 0
fi

[ -x "$py" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"

# Keep Debian's numpy and protobuf: torch 1.13 and onnx 1.12 are built
# against them, and a newer copy in the venv would shadow them.
constraints=$venv/constraints.txt
/usr/bin/python3 - > "$constraints" <<'PY'
import importlib.metadata as md
for name in ("numpy", "protobuf", "sympy", "packaging"):
    try:
        print("%s==%s" % (name, md.version(name)))
    except md.PackageNotFoundError:
        pass
PY
"$py" -m pip install --quiet --constraint "$constraints" onnxruntime
"$py" -c "import onnxruntime, onnx, torch, numpy; print('bench/setup: onnxruntime', onnxruntime.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
