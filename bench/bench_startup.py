"""What torch costs the sim node at start: time and peak memory of a fresh process that imports the sim node and
builds its table-top, with and without torch loaded first (what the sim node paid when the object kinds came
from the find-the-cup networks' module), measured side by side in one run, runs alternated.

    python bench/bench_startup.py [--runs 5]

Prints each variant's median seconds and peak RSS, and the ratios (with torch / without).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, resource, sys, time
started = time.perf_counter()
if {torch}:
    import torch  # noqa: F401
from act_node.nodes.sim_node import SimNode  # noqa: F401
from act_node.config import GraphConfig
from act_node.stepping import SimEpisodes
sim = SimEpisodes(GraphConfig(policy="expert"))
sim.start_episode()
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "torch": "torch" in sys.modules}}))
"""


def one(torch: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD.format(torch=torch)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(args.runs):
        for torch in (False, True):  # alternated: a busy moment of the machine hits both
            runs[torch].append(one(torch))
    assert not any(r["torch"] for r in runs[False]), "the sim node imported torch by itself"
    summary = {("with torch" if torch else "sim node alone"): {
        "seconds": statistics.median(r["seconds"] for r in results),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results)} for torch, results in runs.items()}
    alone, loaded = summary["sim node alone"], summary["with torch"]
    for name, figures in summary.items():
        print(f"{name:>15}: {figures['seconds']:.2f} s, {figures['peak_rss_mb']:.0f} MB peak (median of {args.runs})")
    print(f"with torch / alone: time {loaded['seconds'] / alone['seconds']:.2f}x, "
          f"memory {loaded['peak_rss_mb'] / alone['peak_rss_mb']:.2f}x")


if __name__ == "__main__":
    main()
