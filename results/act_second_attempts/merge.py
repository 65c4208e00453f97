"""How the 840-episode data of results/act_second_attempts was made: the 600 of results/act_cameras ("Measured
since: 600 demonstrations": the recipe's 360 and 240 more clean ones, merged from their own folders as
merge_600.py does; outputs/big/data, itself a merge, does not merge again: aggregate_datasets looks for a
meta/episodes file it never wrote) and 240 second attempts recorded in two processes side by side
(outputs/dagger/data0, seeds from 30000, and data1, from 31000) merged with LeRobot's aggregate_datasets into
outputs/dagger/merged, act-sim record's own metadata (the renderer, each episode's seed, push scale and
takeover) written for the merged order, and the raw maps linked in that order for the cache stage.

    .venv/bin/python results/act_second_attempts/merge.py        # then act_lab.vision.cache
"""
import os
from pathlib import Path

from lerobot.datasets.aggregate import aggregate_datasets

from act_node.checkpoints import write_renderer
from act_node.record import SeedRecord

SOURCES = [(Path("outputs/recipe/data"), Path("outputs/recipe/raw_maps")),
           (Path("outputs/more/data"), Path("outputs/more/raw_maps")),
           (Path("outputs/dagger/data0"), Path("outputs/dagger/raw_maps0")),
           (Path("outputs/dagger/data1"), Path("outputs/dagger/raw_maps1"))]
ROOT = Path("outputs/dagger/merged/data")
RAW = Path("outputs/dagger/merged/raw_maps")

aggregate_datasets(["local/act_pick_cam"] * len(SOURCES), "local/act_pick_cam",
                   roots=[data for data, _ in SOURCES], aggr_root=ROOT)
write_renderer(ROOT / "meta", "tiny")  # every source was drawn with TinyRenderer (their act_node_renderer.json)
records = [SeedRecord.read(data) for data, _ in SOURCES]
SeedRecord(sum((record.episode_seeds for record in records), []), max(record.next_seed for record in records),
           records[0].objects, records[0].after_success, sum((record.episode_noise for record in records), []),
           sum((record.episode_takeover for record in records), [])).write(ROOT)
RAW.mkdir(parents=True, exist_ok=True)
os.symlink((SOURCES[0][1] / "maps.json").resolve(), RAW / "maps.json")  # the same backbone in every source
index = 0
for (_, raw), record in zip(SOURCES, records, strict=True):
    for episode in range(len(record.episode_seeds)):
        os.symlink((raw / f"episode_{episode:06d}.npz").resolve(), RAW / f"episode_{index:06d}.npz")
        index += 1
print(f"{ROOT}: {index} episodes; raw maps linked in {RAW}")
