#!/usr/bin/python3
"""Draws what `moe-plan placement --plot FILE.png` measured.

Usage: plot_placement.py DATA.json OUT.png, where DATA.json is what moe-plan
writes (plotData in moe-plan.cpp): one layer's share of tokens per expert
per record, its rank loads at the last record under each algorithm, and
each algorithm's balancedness per record (median over layers).

Three panels: the expert-load heatmap over steps; the per-rank load of the
last record before (static) and after re-placement (each algorithm); the
balancedness of every algorithm over steps.
"""

import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_placement.py DATA.json OUT.png")
    try:
        import matplotlib
    except ImportError:
        sys.exit("needs matplotlib for %s (Debian: python3-matplotlib)"
                 % sys.executable)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(sys.argv[1]) as f:
        data = json.load(f)
    steps = data["steps"]
    shares = data["shares"]
    experts = len(shares[0])
    names = data["algorithms"]
    # Before in grey, the algorithms after it in colour.
    colours = {"static": "0.6", "smartmoe": "C2", "eplb": "C0", "ours": "C1"}

    fig, (heat, ranks, balance) = plt.subplots(
        3, 1, figsize=(9, 10), gridspec_kw={"height_ratios": [3, 2, 2]})
    fig.suptitle(data["title"], fontsize=10)

    # Experts down, steps across: the share of the layer's tokens.
    image = heat.imshow(
        [list(row) for row in zip(*shares)], aspect="auto", cmap="viridis",
        interpolation="nearest", origin="lower",
        extent=[steps[0], steps[-1], -0.5, experts - 0.5])
    heat.set_title("layer %d: share of its tokens per expert" % data["layer"],
                   fontsize=10)
    heat.set_xlabel("training step")
    heat.set_ylabel("expert")
    fig.colorbar(image, ax=heat, label="share of tokens")

    # Rank loads of the last record relative to the mean, one group of bars
    # per rank.
    loads = data["rank_loads"]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs = [r + (i - (len(names) - 1) / 2) * width
              for r in range(len(loads[name]))]
        ranks.bar(xs, loads[name], width, label=name, color=colours.get(name))
    ranks.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ranks.set_title("layer %d, step %d: load per rank (1 = mean), static "
                    "before, the others after re-placement"
                    % (data["layer"], steps[-1]), fontsize=10)
    ranks.set_xlabel("rank")
    ranks.set_ylabel("load / mean")
    ranks.legend(fontsize=8)

    judged = steps[data["first_judged"]:]
    for name in names:
        balance.plot(judged, data["balance"][name], label=name, linewidth=1,
                     color=colours.get(name))
    balance.set_ylim(0, 1.02)
    balance.set_title("balancedness (mean / max rank load), median over "
                      "layers", fontsize=10)
    balance.set_xlabel("training step")
    balance.set_ylabel("balancedness")
    balance.legend(fontsize=8, loc="lower left")

    fig.tight_layout()
    try:
        fig.savefig(sys.argv[2], dpi=80)
    except OSError as e:
        sys.exit("cannot write %s: %s" % (sys.argv[2], e.strerror))


if __name__ == "__main__":
    main()
