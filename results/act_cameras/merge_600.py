"""How the 600-episode data of "Measured since: 600 demonstrations" was made: the recipe's 360 episodes
(outputs/recipe/data) and 240 more clean ones (outputs/more/data, seeds 10360-10601) merged with LeRobot's
aggregate_datasets into outputs/big/data, act-sim record's own metadata (the renderer, each episode's seed and
push scale) written for the merged order, and the raw maps linked in that order for the cache stage.

    .venv/bin/python results/act_cameras/merge_600.py          # 11 s here; then act_lab.vision.cache

`act-lab recipe --more-episodes 240`, with the first run's flags (README.md), records the same three parts into one
dataset instead.
"""
import os
from pathlib import Path

from lerobot.datasets.aggregate import aggregate_datasets

from act_node.checkpoints import write_renderer
from act_node.record import SeedRecord

SOURCES = [Path("outputs/recipe"), Path("outputs/more")]
ROOT = Path("outputs/big/data")
RAW = Path("outputs/big/raw_maps")

aggregate_datasets(["local/act_pick_cam"] * len(SOURCES), "local/act_pick_cam",
                   roots=[source / "data" for source in SOURCES], aggr_root=ROOT)
write_renderer(ROOT / "meta", "tiny")  # both sources were drawn with TinyRenderer (their act_node_renderer.json)
records = [SeedRecord.read(source / "data") for source in SOURCES]
SeedRecord(sum((record.episode_seeds for record in records), []), max(record.next_seed for record in records),
           records[0].objects, records[0].after_success,
           sum((record.episode_noise for record in records), [])).write(ROOT)
RAW.mkdir(parents=True, exist_ok=True)
os.symlink((SOURCES[0] / "raw_maps" / "maps.json").resolve(), RAW / "maps.json")  # the same backbone in both
index = 0
for source, record in zip(SOURCES, records, strict=True):
    for episode in range(len(record.episode_seeds)):
        os.symlink((source / "raw_maps" / f"episode_{episode:06d}.npz").resolve(), RAW / f"episode_{index:06d}.npz")
        index += 1
print(f"{ROOT}: {index} episodes; raw maps linked in {RAW}")
