"""A recording stopped at any moment: the graph recording the expert (`act-sim launch policy:=expert record:=DIR`)
gets SIGTERM on its whole process group (as a supervisor or `kill -- -PGID` sends it) at a random moment, again
and again, each round going on with `resume:=true`. After every stop the dataset must load in LeRobot, hold no
half episode (its frames in the files = its total_frames), and keep every episode it held before plus every one
the recorder logged as saved.

    python bench/bench_recorder_stops.py [--rounds 10] [--max-s 40] [--seed 0] [--out outputs/recorder_stops]

Prints one row a round (when the stop came, the episodes saved in the round, the dataset's episodes and frames
after it, whether it loaded) and the rounds that kept everything, out of all.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(160 + os.getpid() % 40))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GRAPH = ["policy:=expert", "objects:=2", "image_height:=48", "image_width:=64", "renderer:=tiny",
         "target_source:=truth", "repo_id:=local/stops", "episodes:=0"]


def load(root: Path) -> tuple[int, int, int]:
    """(episodes, total_frames, frames in the files) of the dataset at `root`, loaded by LeRobot."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/stops", root=root)
    return dataset.meta.total_episodes, dataset.meta.total_frames, len(dataset.hf_dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--min-s", type=float, default=1.0, help="earliest stop, seconds after the graph started")
    parser.add_argument("--max-s", type=float, default=40.0, help="latest stop")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs/recorder_stops")
    args = parser.parse_args()
    logging.getLogger("lerobot").setLevel(logging.ERROR)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    root = out / "data"
    moments = random.Random(args.seed)
    rows, held, next_seed = [], (0, 0), 0
    for round_ in range(args.rounds):
        after_s = moments.uniform(args.min_s, args.max_s)
        log_path = out / f"round{round_}.log"
        resume = "true" if root.exists() else "false"
        command = [sys.executable, "-m", "act_node.cli", "launch", *GRAPH, f"first_seed:={next_seed}",
                   f"record:={root}", f"resume:={resume}"]
        with log_path.open("w") as log:
            graph = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(after_s)
            os.killpg(graph.pid, signal.SIGTERM)
            try:
                code = graph.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(graph.pid, signal.SIGKILL)
                code = "hung: SIGKILL after 120 s"
        text = log_path.read_text()
        saved = text.count("episode saved")
        row = {"round": round_, "stop_after_s": round(after_s, 1), "exit": code, "saved_in_round": saved,
               "tracebacks": text.count("Traceback")}
        if not root.exists():  # stopped before the recorder made the dataset: nothing to keep
            row.update(loaded=None, episodes=0, frames=0, kept_all=saved == 0)
        else:
            try:
                episodes, frames, in_files = load(root)
                row.update(loaded=True, episodes=episodes, frames=frames, whole=frames == in_files,
                           kept_all=episodes == held[0] + saved and frames == in_files and frames >= held[1])
                held = (episodes, frames)
            except Exception as error:  # noqa: BLE001 (the row says what failed)
                row.update(loaded=False, error=repr(error)[:200], kept_all=False)
        next_seed += 50  # every round on seeds of its own (the recorder names no seeds; the sim starts where told)
        rows.append(row)
        print(json.dumps(row), flush=True)
    kept = sum(bool(r["kept_all"]) for r in rows)
    print(f"{kept}/{len(rows)} stops kept every saved episode in a dataset LeRobot loads; "
          f"{held[0]} episodes, {held[1]} frames at the end")
    (out / "stops.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
