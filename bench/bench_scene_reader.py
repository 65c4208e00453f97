"""The scene reader's cost, measured side by side in one run.

  reading       one 96x128 frame read (network and decoding) on 1 and on 2 torch threads, ms
  graph         `act-sim launch clock:=realtime` with the shipped ACT, the selector's objects from the sim's truth
                (scene:=sim) and from the scene reader (scene:=cameras: one reading an episode): sim seconds per
                wall second from /clock, the two in turn, twice each
Run: .venv/bin/python bench/bench_scene_reader.py [--seconds 40]
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from bench_ros import CLOCK_LISTENER, beside_a_graph  # noqa: E402


def graph_factor(arguments: list[str], seconds: float) -> float:
    """The realtime factor of a graph with these launch arguments, the target from the selector (bench_ros's
    clock listener beside it)."""
    sim_s, wall_s, _ = json.loads(beside_a_graph(arguments, CLOCK_LISTENER, seconds, 3, truth_target=False))
    return sim_s / wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--summary", type=Path, default=None)
    args = parser.parse_args()
    from act_lab.vision.scene_eval import reading_time
    from act_node.config import shipped_checkpoint
    from act_node.perception.scene import SceneReader

    reading = reading_time(SceneReader.load())
    print(f"scene reader, one 96x128 frame: {reading['threads_1_ms']:.2f} ms on 1 thread, "
          f"{reading['threads_2_ms']:.2f} ms on 2 ({reading['threads_1_ms'] / reading['threads_2_ms']:.2f}x)")
    base = [f"checkpoint:={shipped_checkpoint()}", "image_height:=96", "image_width:=128"]
    runs = {"scene:=sim": ["scene:=sim"], "scene:=cameras": ["scene:=cameras"]}
    factors: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(2):  # in turn, so that the machine's drift falls on both
        for name, extra in runs.items():
            factors[name].append(graph_factor(base + extra, args.seconds))
    for name, values in factors.items():
        print(f"realtime factor, shipped ACT, {name}: {sum(values) / len(values):.3f} ({values})")
    ratio = sum(factors["scene:=cameras"]) / sum(factors["scene:=sim"])
    print(f"scene:=cameras / scene:=sim: {ratio:.3f}")
    if args.summary:
        args.summary.write_text(json.dumps({"reading": reading, "factors": factors, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
