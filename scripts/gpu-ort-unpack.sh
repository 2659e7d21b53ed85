#!/bin/bash
# On the GPU machine: moves the parts of scripts/gpu-ort-pack.sh that this
# transfer brought (.gpu-ort/part-NN beside .gpu-ort/manifest) into DEST
# (default /tmp/moe-ort), and once every part is there checks the archive
# against the manifest and unpacks the package into DEST/site, for
#   MOE_ORT_SITE=DEST/site ./scripts/gpu-run.sh --bench-only
# (the default DEST is where gpu-run.sh looks). Prints what is still
# missing; exits 1 on a bad part or, at the first part, the wrong Python.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=$ROOT/.gpu-ort
DEST=${1:-/tmp/moe-ort}
PYTHON=${PYTHON:-python3}
[ -f "$SRC/manifest" ] || { echo "gpu-ort-unpack: no $SRC/manifest (carry it with each part)" >&2; exit 1; }
# The wheel's Python first, before any part is kept: a pack for the wrong
# one would otherwise take every transfer before it is found out.
python=$(sed -n 's/^python=//p' "$SRC/manifest")
here=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$here" != "$python" ]; then
  echo "gpu-ort-unpack: the parts hold a wheel for Python $python, but $PYTHON is $here; pack again with ./scripts/gpu-ort-pack.sh $here" >&2
  exit 1
fi
mkdir -p "$DEST/parts"
cp "$SRC/manifest" "$DEST/manifest"
for part in "$SRC"/part-*; do
  [ -e "$part" ] && cp "$part" "$DEST/parts/"
done
want=$(sed -n 's/^parts=//p' "$DEST/manifest")
have=$(ls "$DEST/parts" | wc -l)
if [ "$have" -lt "$want" ]; then
  missing=""
  for ((i = 0; i < want; i++)); do
    name=$(printf 'part-%02d' "$i")
    [ -e "$DEST/parts/$name" ] || missing="$missing $name"
  done
  echo "gpu-ort-unpack: $have of $want parts here; still to carry:$missing"
  exit 0
fi
sum=$(cat "$DEST"/parts/part-* | sha256sum | cut -d' ' -f1)
if [ "$sum" != "$(sed -n 's/^sha256=//p' "$DEST/manifest")" ]; then
  echo "gpu-ort-unpack: the $want parts do not add up to the packed archive (sha256 $sum); carry them again" >&2
  rm -rf "$DEST/parts"
  exit 1
fi
rm -rf "$DEST/site"
mkdir -p "$DEST/site"
cat "$DEST"/parts/part-* | "$PYTHON" -c '
import lzma, sys, tarfile
with tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode="r|") as archive:
    archive.extractall(sys.argv[1])
' "$DEST/site"
echo "gpu-ort-unpack: $(sed -n 's/^wheel=//p' "$DEST/manifest") unpacked into $DEST/site"
echo "  MOE_ORT_SITE=$DEST/site ./scripts/gpu-run.sh --bench-only"
