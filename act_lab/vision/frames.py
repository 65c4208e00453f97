"""Camera images in the states the policy meets, with their labels (labels.py), as uint8 shards on disk.

Scenes are sampled as PickObjectEnv.reset samples them (4 or 6 objects, alternating by seed); the arm follows
the scripted expert's pick (act_node.tabletop.expert.ScriptedExpert) with, in most episodes, smooth random
offsets on its joints, so the wrist camera also sees off-plan views: beside the object, above a neighbour, the
jaws closed on nothing, and the returns to the plan (recoveries). Every FRAME_EVERY control ticks both cameras
are drawn at the recipe's size (96x128, TinyRenderer: what `act-sim record --height 96 --width 128` draws).

Seeds: shard i of the training set takes episode seeds TRAIN_SEED_BASE + i * SEEDS_PER_SHARD on, the held-out
validation shards VAL_SEED_BASE + i * SEEDS_PER_SHARD on: disjoint from the evaluation seeds (1000-1049,
2000-2399) and the recordings' (10000 on). A shard holds FRAMES_PER_SHARD frames (the last episode cut there)
and is written atomically (a .partial file renamed), so a stopped generation resumes at the first shard missing.

    python -m act_lab.vision.frames --out outputs/recipe/encoder/frames --frames 2000   # or through encoder.py
"""

from __future__ import annotations

import argparse
import io
import json
import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_lab.vision.labels import KIND_NAMES, ImageLabels, image_labels, render_views
from act_node import so101
from act_node.tabletop.perturb import KNOT_TICKS, ZERO_KNOT_SHARE, smooth_offsets

CAMERAS = ("front", "wrist")
IMAGE_SIZE = (96, 128)  # the recipe's (act_node.config.TRAIN_IMAGE_SIZE)
TRAIN_SEED_BASE = 500_000
VAL_SEED_BASE = 900_000
SEEDS_PER_SHARD = 1_000  # room: a shard uses about FRAMES_PER_SHARD / 38 seeds
FRAMES_PER_SHARD = 500  # 1000 images, about 37 MB of pixels
OBJECT_COUNTS = (4, 6)
FRAME_EVERY = 4  # control ticks between drawn frames (30 fps: 7.5 frames a second of the pick)
AFTER_PLAN_TICKS = 30  # the episode runs this long past the plan's end: the hold, objects knocked or lifted
PERTURBED_SHARE = 0.75  # episodes whose arm gets random joint offsets
# Joint offsets (tabletop.perturb.smooth_offsets: knots every KNOT_TICKS ticks, ZERO_KNOT_SHARE of them zero)
# with these standard deviations (degrees; the gripper in its 0-100 units). Chosen so that the jaws often miss
# the object by a few centimetres, the scale of the errors a policy makes.
OFFSET_STD = np.array([8.0, 6.0, 6.0, 8.0, 25.0, 20.0])


@dataclass(frozen=True)
class ShardSpec:
    """One shard to generate: its file, its first seed, how many frames, at what size."""

    path: Path
    first_seed: int
    frames: int
    image_size: tuple[int, int] = IMAGE_SIZE


def shard_specs(folder: Path, split: str, frames: int, image_size: tuple[int, int] = IMAGE_SIZE) -> list[ShardSpec]:
    """The shards that hold `frames` frames of `split` ("train" or "val") under `folder`."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    if frames < 1:
        raise ValueError(f"{split} frames must be >= 1, got {frames}")
    base = TRAIN_SEED_BASE if split == "train" else VAL_SEED_BASE
    count = math.ceil(frames / FRAMES_PER_SHARD)
    if base + count * SEEDS_PER_SHARD > (VAL_SEED_BASE if split == "train" else 2 ** 31):
        raise ValueError(f"{frames} {split} frames need {count} shards: their seeds would run into the next split's")
    return [ShardSpec(Path(folder) / f"{split}_{i:04d}.npz", base + i * SEEDS_PER_SHARD,
                      min(FRAMES_PER_SHARD, frames - i * FRAMES_PER_SHARD), tuple(image_size)) for i in range(count)]


def joint_offsets(rng: np.random.Generator, ticks: int) -> np.ndarray:
    """Random offsets (ticks, 6) in LeRobot units, added to the expert's actions; zero for a clean episode."""
    if rng.random() >= PERTURBED_SHARE:
        return np.zeros((ticks, 6))
    return smooth_offsets(rng, ticks, OFFSET_STD, KNOT_TICKS, ZERO_KNOT_SHARE)


class FrameMaker:
    """One table-top (PickObjectEnv, true target, TinyRenderer) that draws labelled frames along episodes."""

    def __init__(self, image_size: tuple[int, int] = IMAGE_SIZE):
        from act_node.tabletop.env import PickObjectEnv
        from act_node.tabletop.expert import ScriptedExpert

        self.env = PickObjectEnv(objects=OBJECT_COUNTS[0], cameras=CAMERAS, image_size=tuple(image_size),
                                 target_source="truth", renderer="tiny")
        self.expert = ScriptedExpert(self.env)

    def episode(self, seed: int) -> list[dict]:
        """The labelled frames of one seeded episode ([] when the expert cannot plan the scene)."""
        from act_node.tabletop.kinematics import Unreachable

        env = self.env
        objects = OBJECT_COUNTS[seed % len(OBJECT_COUNTS)]
        observation, _ = env.reset(seed=seed, options={"objects": objects})
        try:
            self.expert.reset(observation)
        except Unreachable:
            return []
        rng = np.random.default_rng([seed, 1])
        ticks = min(self.expert.plan_steps + AFTER_PLAN_TICKS, env.max_steps)
        offsets = joint_offsets(rng, ticks)
        perturbed = bool(np.any(offsets))
        low, high = so101.LOWER_LEROBOT, so101.UPPER_LEROBOT
        frames, phase = [], int(rng.integers(FRAME_EVERY))
        for tick in range(ticks):
            if tick % FRAME_EVERY == phase:
                frames.append(self.frame(seed, tick, perturbed))
            env.act(np.clip(self.expert.act(observation) + offsets[tick], low, high))
        return frames

    def frame(self, seed: int, tick: int, perturbed: bool) -> dict:
        table = self.env.table
        views = render_views(table, list(CAMERAS))
        frame = {"seed": seed, "tick": tick, "perturbed": perturbed,
                 "joints": so101.to_lerobot(table.robot.joint_positions()).astype(np.float32),
                 "in_scene": np.isin(KIND_NAMES, [o.kind.name for o in table.task.scene.objects])}
        for camera, (rgb, segmentation) in views.items():
            frame[f"{camera}_images"] = rgb
            labels = image_labels(table, camera, segmentation)
            for name in ImageLabels.field_names():
                frame[f"{camera}_{name}"] = getattr(labels, name)
        return frame

    def close(self) -> None:
        self.env.close()


def make_shard(maker: FrameMaker, spec: ShardSpec) -> int:
    """Generate and write one shard (atomically); returns its frame count."""
    frames: list[dict] = []
    seed = spec.first_seed
    while len(frames) < spec.frames:
        if seed >= spec.first_seed + SEEDS_PER_SHARD:
            raise RuntimeError(f"{spec.path.name}: {SEEDS_PER_SHARD} seeds from {spec.first_seed} gave only "
                               f"{len(frames)} of {spec.frames} frames")
        frames += maker.episode(seed)
        seed += 1
    frames = frames[:spec.frames]
    arrays = {key: np.stack([frame[key] for frame in frames]) for key in frames[0]}
    arrays["meta"] = np.array(json.dumps({"cameras": list(CAMERAS), "image_size": list(spec.image_size),
                                          "renderer": "tiny", "seeds": [spec.first_seed, seed - 1],
                                          "frame_every": FRAME_EVERY, "kinds": list(KIND_NAMES)}))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    partial = spec.path.with_name(spec.path.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, spec.path)
    return len(frames)


_maker: FrameMaker | None = None  # one per worker process


def _make_in_worker(spec: ShardSpec) -> tuple[str, int]:
    global _maker
    if _maker is None:
        _maker = FrameMaker(spec.image_size)
    return spec.path.name, make_shard(_maker, spec)


def generate(specs: list[ShardSpec], workers: int = 2, description: str = "frames") -> dict:
    """Write the shards of `specs` that are not on disk yet, `workers` processes at once; returns
    {"shards": written, "frames": written, "seconds": ..., "frames_per_s": ...}."""
    missing = [spec for spec in specs if not spec.path.is_file()]
    done = sum(spec.frames for spec in specs) - sum(spec.frames for spec in missing)
    started = time.perf_counter()
    if missing:
        missing[0].path.parent.mkdir(parents=True, exist_ok=True)
    progress = tqdm(total=sum(spec.frames for spec in specs), initial=done, desc=description, unit="frame",
                    smoothing=0.1)
    written = 0
    try:
        if workers <= 1 or len(missing) <= 1:
            maker = FrameMaker(missing[0].image_size) if missing else None
            for spec in missing:
                written += make_shard(maker, spec)
                progress.update(spec.frames)
            if maker is not None:
                maker.close()
        else:
            with multiprocessing.get_context("spawn").Pool(workers) as pool:
                for _, count in pool.imap_unordered(_make_in_worker, missing):
                    written += count
                    progress.update(count)
    finally:
        progress.close()
    seconds = time.perf_counter() - started
    return {"shards": len(missing), "frames": written, "seconds": round(seconds, 1),
            "frames_per_s": round(written / seconds, 2) if written else None}


@dataclass
class ImageSet:
    """Both cameras' images of some shards as one set: the encoder is shared by the cameras, as ACT's is."""

    images: np.ndarray  # (N, H, W, 3) uint8
    camera: np.ndarray  # (N,) int64 index into CAMERAS
    labels: dict[str, np.ndarray]  # ImageLabels' fields, each (N, 8, ...)

    def __len__(self) -> int:
        return len(self.images)


def load_images(paths: list[Path], limit: int | None = None) -> ImageSet:
    """The images of these shards (front and wrist of each frame), at most `limit` frames a camera."""
    images, cameras, labels = [], [], {name: [] for name in ImageLabels.field_names()}
    frames = 0
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"shard missing: {path} (generate it first)")
        with np.load(path) as shard:
            take = len(shard["seed"]) if limit is None else min(len(shard["seed"]), limit - frames)
            for index, camera in enumerate(CAMERAS):
                images.append(shard[f"{camera}_images"][:take])
                cameras.append(np.full(take, index))
                for name in labels:
                    labels[name].append(shard[f"{camera}_{name}"][:take])
        frames += take
        if limit is not None and frames >= limit:
            break
    if not images:
        raise ValueError("no shards to load")
    return ImageSet(np.concatenate(images), np.concatenate(cameras),
                    {name: np.concatenate(values) for name, values in labels.items()})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the shards")
    parser.add_argument("--frames", type=int, required=True, help="training frames (two images each)")
    parser.add_argument("--val-frames", type=int, default=None, help="held-out frames (default: a tenth)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    val = args.val_frames or max(FRAMES_PER_SHARD, args.frames // 10)
    print(json.dumps(generate(shard_specs(args.out, "train", args.frames), args.workers, "train frames")))
    print(json.dumps(generate(shard_specs(args.out, "val", val), args.workers, "val frames")))


if __name__ == "__main__":
    main()
