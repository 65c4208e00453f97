"""The yaw reader's error on the evaluation scenes: each seed's requested object, read as act-sim eval's env reads
it (the front and wrist cameras at reset, 96x128, TinyRenderer), against the simulator's yaw.

    .venv/bin/python results/act_yaw/errors.py --first-seed 2100 --episodes 300 --objects 4 \
        --out results/act_yaw/errors_2100_300_4.json
"""
import argparse
import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_lab.vision.yaw import yaw_error_deg
from act_node.perception.yaw import YawReader, kind_turns, symmetric_yaw
from act_node.tabletop.env import PickObjectEnv

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--first-seed", type=int, default=2100)
parser.add_argument("--episodes", type=int, default=300)
parser.add_argument("--objects", type=int, default=4)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

reader = YawReader.load()
env = PickObjectEnv(objects=args.objects, cameras=("wrist",), image_size=(24, 32), environment_layout="target_tool_yaw",
                    yaw_reader=reader)
episodes = []
for seed in tqdm(range(args.first_seed, args.first_seed + args.episodes), desc="scenes"):
    observation, _ = env.reset(seed=seed)
    request = env.scene.request
    if kind_turns(request) == 0:
        continue
    (state,) = [s for s in env.table.task.object_states() if s.kind == request]
    error = float(yaw_error_deg(observation["environment_state"][-2:], symmetric_yaw(request, state.yaw),
                                kind_turns(request)))
    episodes.append({"seed": seed, "request": request, "error_deg": round(error, 2)})
env.close()
by_kind = {}
for kind in sorted({e["request"] for e in episodes}):
    errors = np.array([e["error_deg"] for e in episodes if e["request"] == kind])
    by_kind[kind] = {"count": len(errors), "median_deg": round(float(np.median(errors)), 1),
                     "p90_deg": round(float(np.quantile(errors, 0.9)), 1),
                     "under_10_deg": round(float((errors < 10).mean()), 2), "range_deg": 180 / kind_turns(kind)}
args.out.write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)}, "by_kind": by_kind,
                                "episodes": episodes}, indent=1) + "\n")
for kind, row in by_kind.items():
    print(f"{kind:5s} {row}")
