"""Copies a bundle and edits it as a user (or a fault) might after
compilation: edit_bundle.py GOOD OUT EDIT. `show-library` prints the
manifest that model.so holds of itself instead."""
import json
import os
import re
import shutil
import sys

good, out, edit = sys.argv[1:4]

if edit == "show-library":
    data = open(os.path.join(good, "model.so"), "rb").read()
    match = re.search(rb'\{"entry".*?\}\0', data) or re.search(
        rb'\{[^\0]*"format":4[^\0]*\}\0', data)
    text = match.group(0)[:-1].decode()
    print(json.dumps(json.loads(text), sort_keys=True))
    sys.exit(0)

shutil.rmtree(out, ignore_errors=True)
shutil.copytree(good, out)
manifest_path = os.path.join(out, "model.json")
manifest = json.load(open(manifest_path))


def write_manifest(m):
    with open(manifest_path, "w") as f:
        json.dump(m, f, indent=2)


def edit_file(name, change):
    path = os.path.join(out, name)
    data = bytearray(open(path, "rb").read())
    data = change(data)
    open(path, "wb").write(bytes(data))


if edit == "output-shape":
    manifest["outputs"][0]["shape"][0] = 1
    write_manifest(manifest)
elif edit == "input-dtype":
    manifest["inputs"][0]["dtype"] = "f16"
    write_manifest(manifest)
elif edit == "drop-weight":
    manifest["weights"].pop()
    write_manifest(manifest)
elif edit == "repeat-weight":
    manifest["weights"].append(manifest["weights"][0])
    write_manifest(manifest)
elif edit == "weight-offset":
    manifest["weights"][0]["offsets"][0] = manifest["weights_bytes"]
    write_manifest(manifest)
elif edit == "flip-weights":
    def flip(d):
        d[len(d) // 2] ^= 0x40
        return d
    edit_file("weights.bin", flip)
elif edit == "truncate-weights":
    edit_file("weights.bin", lambda d: d[: len(d) // 2])
elif edit == "truncate-library":
    edit_file("model.so", lambda d: d[:4096])
elif edit == "flip-library":
    def flip(d):
        d[len(d) - 100] ^= 0x01
        return d
    edit_file("model.so", flip)
elif edit == "deep-json":
    text = open(manifest_path).read()
    text = text.rstrip()[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}"
    open(manifest_path, "w").write(text)
elif edit == "duplicate-key":
    text = open(manifest_path).read()
    text = text.replace('"entry":', '"entry": "other", "entry":', 1)
    open(manifest_path, "w").write(text)
elif edit == "old-format":
    manifest["format"] = 3
    write_manifest(manifest)
else:
    sys.exit("unknown edit " + edit)
