"""Memory while recording: the recorder's resident set size (RSS) after each saved episode, at 120x160.

A recorder that keeps something per episode (frames, stats, metadata rows) grows with the dataset; one
that does not stays flat after its first episodes (imports, encoder, buffers). Printed: RSS at each
checkpoint, the growth between the first and the last, and per 100 episodes from a fit over the second half.
Run: .venv/bin/python bench/bench_record.py --episodes 50 500   (about 3 s an episode on one core)
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from act_node.config import TRAIN_IMAGE_SIZE  # noqa: E402
from act_node.record import record  # noqa: E402
from act_node.tabletop.env import PickObjectEnv  # noqa: E402


def rss_mb() -> float:
    """This process's resident set size, MiB (Linux: /proc/self/statm, in pages)."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, nargs="+", default=[50, 500],
                        help="checkpoints: saved-episode counts at which to report RSS (the last ends the run)")
    parser.add_argument("--objects", type=int, default=4)
    args = parser.parse_args()
    checkpoints = sorted(args.episodes)
    rss: dict[int, float] = {}
    started = time.perf_counter()

    def measure(saved: int) -> None:
        rss[saved] = rss_mb()
        if saved in checkpoints:
            print(f"after {saved:4d} episodes: RSS {rss[saved]:7.1f} MiB  ({time.perf_counter() - started:.0f} s)",
                  flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        env = PickObjectEnv(objects=args.objects, image_size=TRAIN_IMAGE_SIZE, target_source="truth")
        before = rss_mb()
        summary = record(env, "local/bench", Path(scratch) / "data", episodes=checkpoints[-1], on_saved=measure)
        env.close()
    height, width = TRAIN_IMAGE_SIZE
    if summary.stopped_by:  # Ctrl-C: say what was measured
        print(f"stopped by {summary.stopped_by} after {summary.recorded} episodes; RSS: "
              + ", ".join(f"{n}: {mb:.1f} MiB" for n, mb in sorted(rss.items())))
        return
    first, last = checkpoints[0], checkpoints[-1]
    print(f"{summary.recorded} episodes, {summary.frames} frames, 2 cameras {height}x{width}, "
          f"{summary.seconds:.0f} s; RSS before recording {before:.1f} MiB")
    print(f"RSS {last} / RSS {first} episodes: {rss[last] / rss[first]:.3f} "
          f"({rss[last] - rss[first]:+.1f} MiB over {last - first} episodes)")
    tail = np.array(sorted(k for k in rss if k > last // 2), dtype=float)
    if len(tail) >= 2:
        slope = np.polyfit(tail, [rss[int(k)] for k in tail], 1)[0]
        print(f"trend over episodes {int(tail[0])}-{last}: {100 * slope:+.2f} MiB per 100 episodes")


if __name__ == "__main__":
    main()
