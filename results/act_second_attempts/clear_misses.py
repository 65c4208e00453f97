"""The 840-episode data (merge.py) without the second attempts taken over from jaws that held something: only those
where the checkpoint's jaws had closed on nothing (the gripper under 2 of 0-100 at the takeover). Where the jaws
held the object but did not lift it, the expert's new plan opens them and grasps again, and a policy fed only the
joints cannot tell that state from its own good grasp. LeRobot's lerobot-edit-dataset deletes the episodes from
each recording (an aggregated dataset does not edit: it looks for a meta/episodes file aggregate_datasets never
wrote), then merge.py's sources are merged again, the seed file and the raw maps written for the new order.

    .venv/bin/python results/act_second_attempts/clear_misses.py     # then act_lab.vision.cache
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from lerobot.datasets.aggregate import aggregate_datasets

from act_node.checkpoints import write_renderer
from act_node.record import SeedRecord

CLOSED = 2.0  # gripper state (0-100) at the takeover below which the jaws held nothing
OUT = Path("outputs/dagger/clear")
SOURCES = [(Path("outputs/recipe/data"), Path("outputs/recipe/raw_maps"), None),
           (Path("outputs/more/data"), Path("outputs/more/raw_maps"), None),
           (Path("outputs/dagger/data0"), Path("outputs/dagger/raw_maps0"), OUT / "data0"),
           (Path("outputs/dagger/data1"), Path("outputs/dagger/raw_maps1"), OUT / "data1")]


def first_grippers(root: Path) -> np.ndarray:
    frames = pa.concat_tables([pq.read_table(path, columns=["episode_index", "frame_index", "observation.state"])
                               for path in sorted((root / "data").rglob("*.parquet"))]).to_pandas()
    first = frames[frames.frame_index == 0].set_index("episode_index").sort_index()
    return np.stack(first["observation.state"].to_numpy())[:, 5]


roots, kept_records, kept_maps = [], [], []
for data, raw, filtered in SOURCES:
    seeds = SeedRecord.read(data)
    keep = list(range(len(seeds.episode_seeds)))
    if filtered is not None:
        gripper = first_grippers(data)
        drop = [index for index, taken in enumerate(seeds.episode_takeover) if taken is not None
                and gripper[index] >= CLOSED]
        keep = [index for index in keep if index not in set(drop)]
        print(f"{data}: dropping {len(drop)} of {len(seeds.episode_seeds)} second attempts (jaws on something)",
              flush=True)
        subprocess.run([sys.executable, "-m", "lerobot.scripts.lerobot_edit_dataset", "--repo_id=local/act_pick_cam",
                        f"--root={data}", "--new_repo_id=local/act_pick_cam", f"--new_root={filtered}",
                        "--operation.type=delete_episodes", f"--operation.episode_indices={drop}"], check=True)
    roots.append(filtered or data)
    kept_records.append(SeedRecord([seeds.episode_seeds[i] for i in keep], seeds.next_seed, seeds.objects,
                                   seeds.after_success, [seeds.episode_noise[i] for i in keep],
                                   [seeds.episode_takeover[i] for i in keep]))
    kept_maps += [raw / f"episode_{i:06d}.npz" for i in keep]
root, maps = OUT / "data", OUT / "raw_maps"
aggregate_datasets(["local/act_pick_cam"] * len(roots), "local/act_pick_cam", roots=roots, aggr_root=root)
write_renderer(root / "meta", "tiny")  # every source was drawn with TinyRenderer
SeedRecord(sum((r.episode_seeds for r in kept_records), []), max(r.next_seed for r in kept_records),
           kept_records[0].objects, kept_records[0].after_success, sum((r.episode_noise for r in kept_records), []),
           sum((r.episode_takeover for r in kept_records), [])).write(root)
maps.mkdir(parents=True, exist_ok=True)
os.symlink((SOURCES[0][1] / "maps.json").resolve(), maps / "maps.json")
for index, path in enumerate(kept_maps):
    os.symlink(path.resolve(), maps / f"episode_{index:06d}.npz")
print(f"{root}: {len(kept_maps)} episodes; raw maps linked in {maps}")
