"""Checks moe-plan placement --json output: FILE (- for stdin) NAME...

The output is one object {"algorithms": {NAME: {"median_balancedness": x,
"min_balancedness": x, "bytes_moved_per_replan": x}}} with exactly the
NAMEs given; balancedness in (0, 1], bytes not negative. Prints what holds.
"""

import json
import sys

text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
result = json.loads(text)
assert list(result) == ["algorithms"], list(result)
algorithms = result["algorithms"]
assert sorted(algorithms) == sorted(sys.argv[2:]), sorted(algorithms)
for name, figures in algorithms.items():
    assert sorted(figures) == ["bytes_moved_per_replan", "median_balancedness",
                               "min_balancedness"], (name, figures)
    assert 0 < figures["min_balancedness"] <= figures["median_balancedness"] <= 1
    assert figures["bytes_moved_per_replan"] >= 0
print("json shape ok")
if algorithms["ours"]["median_balancedness"] > \
        algorithms["static"]["median_balancedness"]:
    print("ours above static")
if algorithms["ours"]["bytes_moved_per_replan"] < \
        algorithms["eplb"]["bytes_moved_per_replan"]:
    print("ours moves less than eplb")
print("ours moves" if algorithms["ours"]["bytes_moved_per_replan"] > 0
      else "ours keeps the layout")
