"""Expert placement on SmartMoE's real load trace: balancedness and migration of each algorithm.

    /usr/bin/python3 bench/placement_bench.py [--ep 16] [--redundant 0,1,2] [--replan-every 10]

Runs `moe-plan placement --json` on ../shared/data/smartmoe-trace
(SmartMoE-AE's GPT-MoE training: 24 MoE layers, 32 experts, 16 ranks, 501
records taken every 10 steps) for each number of redundant slots per rank,
and prints, per algorithm (static = the trivial layout, smartmoe, eplb,
ours), the median and minimum balancedness (mean / max rank load of each
record, every layer) and the bytes all layers move per re-plan, with
moe-plan's default bytes per expert (117 MB: weights, fp32 masters and
Adam state of the trace's 8.4M-parameter experts). Then
`moe-planner-test time`: ours re-planning one layer of 256 experts on
1024 ranks. --plot FILE.png draws the figure of the README with 1
redundant slot per rank. About 10 seconds on 2 cores.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import moe_bench  # noqa: E402

ALGORITHMS = ["static", "smartmoe", "eplb", "ours"]


def run_plan(args, redundant, extra=()):
    command = [os.path.join(args.bin, "moe-plan"), "placement", "--trace", args.trace,
               "--ep", str(args.ep), "--redundant-per-rank", str(redundant),
               "--replan-every", str(args.replan_every)] + list(extra)
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=os.path.join(
        ROOT, "..", "shared", "data", "smartmoe-trace", "smartmoe_trace.npz"))
    parser.add_argument("--ep", type=int, default=16, help="expert-parallel ranks (default 16)")
    parser.add_argument("--redundant", default="0,1,2",
                        help="redundant slots per rank to try (default 0,1,2)")
    parser.add_argument("--replan-every", type=int, default=10,
                        help="re-plan every K records of the trace (default 10 = 100 steps)")
    parser.add_argument("--plot", help="also draw the figure (1 redundant slot per rank) here")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where moe-plan and moe-planner-test are (default build/bin)")
    args = parser.parse_args()

    busy = moe_bench.busy_cores()
    print("machine: %d cores; busy cores before the run %.2f; source: %s"
          % (os.cpu_count(), busy, moe_bench.source()))
    print("trace %s, ep %d, re-planned every %d records\n"
          % (os.path.relpath(args.trace, ROOT), args.ep, args.replan_every))

    print("| redundant per rank | algorithm | median balancedness | min balancedness "
          "| bytes moved per re-plan (all layers) |")
    print("| --- | --- | --- | --- | --- |")
    for redundant in [int(r) for r in args.redundant.split(",")]:
        result = json.loads(run_plan(args, redundant, ["--json"]))["algorithms"]
        for name in ALGORITHMS:
            if name not in result:
                continue
            figures = result[name]
            print("| %d | %s | %.3f | %.3f | %.1f GB |" % (
                redundant, name, figures["median_balancedness"],
                figures["min_balancedness"], figures["bytes_moved_per_replan"] / 1e9))

    print()
    timing = subprocess.run([os.path.join(args.bin, "moe-planner-test"), "time", "1024", "256"],
                            check=True, capture_output=True, text=True).stdout
    print(timing, end="")
    if args.plot:
        run_plan(args, 1, ["--plot", args.plot])
        print("figure: %s" % args.plot)
    if busy > 0.2:
        print("warning: other work was running; the timings are noisy")


if __name__ == "__main__":
    main()
