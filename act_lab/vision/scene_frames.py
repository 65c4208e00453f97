"""Front-camera images of sampled table-tops with what each object is and where, for the scene reader
(act_node.perception.scene): the images drawn under a randomized appearance and from a camera moved within a
calibration's error, so the reader learns what the objects look like, not the renderer's exact pixels.

Each scene (PickObjectEnv's sampling, 4 or 6 objects alternating by seed, settled) gives FRAMES_PER_SCENE
frames: the first with the arm at its home pose (as an episode starts, when the reader is asked), the others
with the arm thrown into random poses (objects hidden behind it, as mid-episode). Per frame:

  appearance  none: the simulator's own look (what the sim node publishes); train: objects' colours moved
              within +-COLOUR_JITTER, the table and floor recoloured, the light's direction, colour and
              ambient/diffuse/specular shares drawn, the camera's eye moved up to EYE_JITTER_M, its look-at
              point up to TARGET_JITTER_M, its roll up to ROLL_JITTER_DEG, its field of view +-FOV_JITTER_DEG;
              shifted: the same kinds of change, each beyond the train range (held out: what the reader never
              saw), for measuring how it carries
  labels      per kind (act_node.tabletop.objects order): present (its centre in the image and at least
              MIN_VISIBLE_PX pixels of it seen), its centre in pixels (projected with the camera as drawn), its
              long axis in the image as (cos k phi, sin k phi) by its symmetry k, and the truth in the table
              frame (x, y, yaw) with the camera's pose and intrinsics as drawn, for measuring in metres

    python -m act_lab.vision.scene_frames --out outputs/scene_reader/frames --frames 20000
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pybullet
from tqdm import tqdm

from act_lab.vision.labels import MIN_VISIBLE_PX, YAW_MIN_FORESHORTENING, YAW_TURNS, project
from act_node import so101
from act_node.perception.scene import KIND_NAMES, READER_CAMERA
from act_node.tabletop.cameras import CAMERAS, CameraSpec, look_at, view_matrix

IMAGE_SIZE = (96, 128)  # the front camera's size in the graph (what the scene reader reads)
FRAMES_PER_SCENE = 4
SHARD_FRAMES = 400
SEED_BASE = {"train": 600_000, "val": 950_000, "plain": 960_000, "shifted": 970_000}  # not evaluation's (1000-2399)
SPLIT_APPEARANCE = {"train": "train", "val": "train", "plain": "none", "shifted": "shifted"}
APPEARANCES = ("none", "train", "shifted")
COLOUR_JITTER = 0.12  # each RGB channel of an object, +-
EYE_JITTER_M, TARGET_JITTER_M, ROLL_JITTER_DEG, FOV_JITTER_DEG = 0.02, 0.03, 3.0, 3.0
AXIS_STEP_M = 0.01


@dataclass(frozen=True)
class Look:
    """How one frame is drawn: the camera as placed and the light."""

    eye: np.ndarray
    target: np.ndarray
    roll_deg: float
    fov_y_deg: float
    light: dict

    def optical(self) -> np.ndarray:
        rotation = look_at(self.eye, self.target)
        roll = math.radians(self.roll_deg)
        spin = np.array([[math.cos(roll), -math.sin(roll), 0], [math.sin(roll), math.cos(roll), 0], [0, 0, 1]])
        return rotation @ spin  # turned about the optical axis


def _beyond(rng: np.random.Generator, low: float, high: float) -> float:
    """A magnitude in [low, high) with a random sign."""
    return float(rng.uniform(low, high) * rng.choice([-1.0, 1.0]))


def draw_look(rng: np.random.Generator, appearance: str) -> Look:
    """The camera and light for one frame under `appearance` (none, train or shifted)."""
    if appearance not in APPEARANCES:
        raise ValueError(f"appearance must be one of {APPEARANCES}, got {appearance!r}")
    front = CAMERAS[READER_CAMERA]
    eye, target, fov = np.array(front["eye"], float), np.array(front["target"], float), front["fov_y_deg"]
    if appearance == "none":
        return Look(eye, target, 0.0, fov, {})
    scale = 1.0 if appearance == "train" else 1.6
    if appearance == "train":
        eye = eye + rng.uniform(-EYE_JITTER_M, EYE_JITTER_M, 3)
        target = target + np.append(rng.uniform(-TARGET_JITTER_M, TARGET_JITTER_M, 2), 0.0)
        roll, fov = rng.uniform(-ROLL_JITTER_DEG, ROLL_JITTER_DEG), fov + rng.uniform(-FOV_JITTER_DEG, FOV_JITTER_DEG)
    else:  # beyond the train range, each in a random direction
        eye = eye + np.array([_beyond(rng, EYE_JITTER_M, scale * EYE_JITTER_M) for _ in range(3)])
        target = target + np.array([_beyond(rng, TARGET_JITTER_M, scale * TARGET_JITTER_M) for _ in range(2)] + [0])
        roll = _beyond(rng, ROLL_JITTER_DEG, scale * ROLL_JITTER_DEG)
        fov = fov + _beyond(rng, FOV_JITTER_DEG, scale * FOV_JITTER_DEG)
    azimuth, elevation = rng.uniform(0, 2 * math.pi), rng.uniform(0.5, 1.4) if appearance == "train" else \
        rng.uniform(0.25, 0.5)
    light = dict(lightDirection=[math.cos(azimuth) * math.cos(elevation), math.sin(azimuth) * math.cos(elevation),
                                 math.sin(elevation)],
                 lightColor=list(rng.uniform(0.75, 1.0, 3) if appearance == "train" else rng.uniform(0.6, 0.75, 3)),
                 lightAmbientCoeff=float(rng.uniform(0.4, 0.8) if appearance == "train" else rng.uniform(0.25, 0.4)),
                 lightDiffuseCoeff=float(rng.uniform(0.3, 0.7)),
                 lightSpecularCoeff=float(rng.uniform(0.0, 0.3)))
    return Look(eye, target, float(roll), float(fov), light)


class SceneFrameMaker:
    """One table-top (TinyRenderer, the front camera) drawing labelled frames of sampled scenes."""

    def __init__(self, image_size: tuple[int, int] = IMAGE_SIZE):
        from act_node.tabletop.table import TableTop

        self.height, self.width = image_size
        spec = CameraSpec(READER_CAMERA, self.height, self.width, **CAMERAS[READER_CAMERA])
        self.table = TableTop([spec], fps=30, renderer="tiny")

    def scene(self, seed: int, appearance: str) -> list[dict]:
        """The FRAMES_PER_SCENE labelled frames of one seeded scene."""
        rng = np.random.default_rng([seed, 7])
        self.table.reset(rng, objects=(4, 6)[seed % 2])
        if appearance != "none":
            self._recolour(rng, appearance)
        home = self.table.robot.joint_positions()
        frames = []
        for index in range(FRAMES_PER_SCENE):
            if index:  # the arm somewhere over the table (no physics: the objects stay where they settled)
                low, high = so101.LOWER_LEROBOT, so101.UPPER_LEROBOT
                pose = so101.from_lerobot(rng.uniform(low + 0.15 * (high - low), high - 0.15 * (high - low)))
            else:
                pose = home
            for joint, angle in zip(self.table.robot.joints, pose):
                self.table.world.reset_joint(self.table.robot.body, joint, float(angle))
            frames.append(self.frame(seed, index, draw_look(rng, appearance)))
        return frames

    def _recolour(self, rng: np.random.Generator, appearance: str) -> None:
        client, task = self.table.world.client, self.table.task
        jitter = COLOUR_JITTER if appearance == "train" else 1.6 * COLOUR_JITTER
        for placed in task.scene.objects:
            for link, part in zip(range(-1, len(placed.kind.parts) - 1), placed.kind.parts):
                rgb = np.clip(np.array(part.rgba[:3]) + rng.uniform(-jitter, jitter, 3), 0, 1)
                client.changeVisualShape(placed.body, link, rgbaColor=[*rgb, 1.0])
        objects = {placed.body for placed in task.scene.objects} | {self.table.robot.body}
        for body in (client.getBodyUniqueId(i) for i in range(client.getNumBodies())):
            if body not in objects:  # the table and the floor
                client.changeVisualShape(body, -1, rgbaColor=[*rng.uniform(0.25, 0.85, 3), 1.0])

    def frame(self, seed: int, index: int, look: Look) -> dict:
        table, client = self.table, self.table.world.client
        spec = CameraSpec(READER_CAMERA, self.height, self.width, fov_y_deg=look.fov_y_deg,
                          eye=tuple(look.eye), target=tuple(look.target))
        optical = look.optical()
        _, _, rgba, _, segmentation = client.getCameraImage(
            self.width, self.height, viewMatrix=view_matrix(look.eye, optical).T.flatten().tolist(),
            projectionMatrix=spec.projection().T.flatten().tolist(), renderer=pybullet.ER_TINY_RENDERER, shadow=0,
            **look.light)
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(self.height, self.width, 4)[..., :3]
        ids = np.asarray(segmentation, dtype=np.int64).reshape(self.height, self.width)
        ids = np.where(ids < 0, -1, ids & ((1 << 24) - 1))
        kinds = len(KIND_NAMES)
        out = {"seed": seed, "index": index, "images": rgb, "present": np.zeros(kinds, bool),
               "in_scene": np.zeros(kinds, bool), "centre_px": np.zeros((kinds, 2), np.float32),
               "yaw": np.zeros((kinds, 2), np.float32), "yaw_valid": np.zeros(kinds, bool),
               "visible_px": np.zeros(kinds, np.int32), "table_xy": np.zeros((kinds, 2), np.float32),
               "table_yaw": np.zeros(kinds, np.float32), "eye": look.eye.astype(np.float32),
               "optical": optical.astype(np.float32), "intrinsics": spec.intrinsics().astype(np.float32)}
        counts = np.bincount(ids[ids >= 0].ravel(), minlength=1)
        intrinsics = spec.intrinsics()
        for placed, state in zip(table.task.scene.objects, table.task.object_states()):
            row = KIND_NAMES.index(state.kind)
            centre = state.position + np.array([0.0, 0.0, state.height_m / 2])
            axis = np.array([math.cos(state.yaw), math.sin(state.yaw), 0.0])
            (pixel, tip), depth = project(np.stack([centre, centre + AXIS_STEP_M * axis]), look.eye, optical,
                                          intrinsics)
            visible = int(counts[placed.body]) if placed.body < len(counts) else 0
            inside = depth[0] > 0.01 and 0 <= pixel[0] < self.width and 0 <= pixel[1] < self.height
            out["in_scene"][row] = True
            out["visible_px"][row] = visible
            out["table_xy"][row] = state.position[:2]
            out["table_yaw"][row] = state.yaw
            if inside and visible >= MIN_VISIBLE_PX:
                out["present"][row] = True
                out["centre_px"][row] = pixel
                along = tip - pixel
                turns = YAW_TURNS[row]
                face_on = intrinsics[0, 0] * AXIS_STEP_M / max(depth[0], 1e-6)
                if turns > 0 and math.hypot(*along) >= YAW_MIN_FORESHORTENING * face_on:
                    phi = math.atan2(along[1], along[0])
                    out["yaw"][row] = (math.cos(turns * phi), math.sin(turns * phi))
                    out["yaw_valid"][row] = True
        return out

    def close(self) -> None:
        self.table.close()


def shard_paths(folder: Path, split: str, frames: int) -> list[tuple[Path, int]]:
    """[(path, first seed)] of the shards holding `frames` frames of `split` (train, val or shifted)."""
    if split not in SEED_BASE:
        raise ValueError(f"split must be one of {list(SEED_BASE)}, got {split!r}")
    scenes = SHARD_FRAMES // FRAMES_PER_SCENE
    return [(Path(folder) / f"{split}_{i:04d}.npz", SEED_BASE[split] + i * scenes)
            for i in range(math.ceil(frames / SHARD_FRAMES))]


def make_shard(maker: SceneFrameMaker, path: Path, first_seed: int, appearance: str) -> None:
    frames = []
    for seed in range(first_seed, first_seed + SHARD_FRAMES // FRAMES_PER_SCENE):
        frames += maker.scene(seed, appearance)
    arrays = {key: np.stack([frame[key] for frame in frames]) for key in frames[0]}
    arrays["meta"] = np.array(json.dumps({"camera": READER_CAMERA, "image_size": [maker.height, maker.width],
                                          "appearance": appearance, "kinds": list(KIND_NAMES),
                                          "seeds": [first_seed, first_seed + len(frames) // FRAMES_PER_SCENE - 1]}))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)  # atomic: a stopped run resumes at the first shard missing


def generate(folder: Path, split: str, frames: int, appearance: str, image_size=IMAGE_SIZE) -> None:
    """Write the shards of `split` not on disk yet."""
    paths = shard_paths(folder, split, frames)
    missing = [(path, seed) for path, seed in paths if not path.is_file()]
    Path(folder).mkdir(parents=True, exist_ok=True)
    maker = SceneFrameMaker(image_size)
    started = time.perf_counter()
    with tqdm(total=len(paths) * SHARD_FRAMES, initial=(len(paths) - len(missing)) * SHARD_FRAMES,
              desc=f"{split} frames ({appearance})", unit="frame") as progress:
        for path, seed in missing:
            make_shard(maker, path, seed, appearance)
            progress.update(SHARD_FRAMES)
    maker.close()
    print(json.dumps({"split": split, "appearance": appearance, "shards_written": len(missing),
                      "seconds": round(time.perf_counter() - started, 1)}))


def load(paths: list[Path]) -> dict[str, np.ndarray]:
    """The shards' arrays, concatenated."""
    arrays: dict[str, list] = {}
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"scene shard missing: {path} (generate it first)")
        with np.load(path) as shard:
            for key in shard.files:
                if key != "meta":
                    arrays.setdefault(key, []).append(shard[key])
    if not arrays:
        raise ValueError("no scene shards to load")
    return {key: np.concatenate(value) for key, value in arrays.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the shards")
    parser.add_argument("--frames", type=int, default=20_000, help="training frames (appearance: train)")
    parser.add_argument("--val-frames", type=int, default=2_000, help="held-out frames, each appearance")
    args = parser.parse_args(argv)
    for split in ("val", "plain", "shifted"):
        generate(args.out, split, args.val_frames, SPLIT_APPEARANCE[split])
    generate(args.out, "train", args.frames, "train")


if __name__ == "__main__":
    main()
