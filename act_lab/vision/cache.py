"""The recipe's cache stage: every recorded frame's camera images through the frozen backbone, once.

ACT's backbone has FrozenBatchNorm2d and, frozen for ACT's training, no gradient: its layer4 map of a frame is
the same at every step, so ACT trains on the maps computed here (512 x 3 x 4 a camera, float16) instead of
running ResNet-18 forward for every sample. What the policy reads at run time is the same: the checkpoint
keeps the backbone and LeRobot runs it on the camera images.

    python -m act_lab.vision.cache --dataset outputs/recipe/data \
        --backbone outputs/recipe/encoder/backbone.safetensors --out outputs/recipe/cache

Layout of OUT: maps_<camera>.npy (N, 512, h, w) float16 in dataset-index order; cache.json says which dataset
(its frame and episode counts) and which backbone (sha256) made them. A camera's maps are computed in blocks of
BLOCK frames, each saved as it ends (OUT/partial/<camera>_NNNN.npy), so a stopped run resumes at the first
block missing; another dataset or backbone in the same OUT is refused.

Where the maps come from. The videos are AV1 at crf 30: a decoded frame is not the frame the simulator drew,
and its maps are not the maps of what the policy sees at run time (raw renders, through the sim node or the
evaluator). Measured on the recipe's data: the same frame's layer4 maps differ by 8% (front) and 16% (wrist)
in relative norm between the raw render and its decoded video frame, against 11% between the front camera's
frames 0 and 30 of one episode. So `act-lab record --raw-maps DIR` runs the backbone on the raw renders while
it records (RawMaps: one DIR/episode_NNNNNN.npz a saved episode) and this stage, given that DIR, assembles
those; without it, it decodes the videos (PyAV, what LeRobot's pyav backend decodes) and says so in
cache.json ("source").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from act_node.checkpoints import file_sha256
from act_node.perception.backbone import act_backbone, images_to_tensor

BLOCK = 2048  # frames a saved block of maps holds
BATCH = 128  # images a backbone forward takes


@dataclass(frozen=True)
class DatasetFrames:
    """What the cache needs of a LeRobotDataset: its cameras, frame and episode counts, video files."""

    root: Path
    cameras: tuple[str, ...]  # feature keys, "observation.images.front", ...
    image_size: tuple[int, int]
    frames: int
    episodes: int
    fps: int

    @classmethod
    def read(cls, root: Path) -> DatasetFrames:
        info_path = Path(root) / "meta" / "info.json"
        if not info_path.is_file():
            raise FileNotFoundError(f"no LeRobotDataset at {root} (meta/info.json missing)")
        info = json.loads(info_path.read_text())
        cameras = tuple(key for key, feature in info["features"].items() if feature["dtype"] == "video")
        if not cameras:
            raise ValueError(f"{root} has no video features: record with --cameras (the cache is of camera images)")
        sizes = {tuple(info["features"][key]["shape"][:2]) for key in cameras}
        if len(sizes) != 1:
            raise ValueError(f"{root}'s cameras differ in size ({sorted(sizes)}): the recipe takes one size")
        return cls(Path(root), cameras, sizes.pop(), int(info["total_frames"]), int(info["total_episodes"]),
                   int(info["fps"]))

    def fingerprint(self) -> dict:
        return {"root": str(self.root.resolve()), "frames": self.frames, "episodes": self.episodes,
                "cameras": list(self.cameras), "image_size": list(self.image_size)}


def decode_camera(root: Path, key: str, repo_id: str = "local/dataset", progress: bool = True) -> np.ndarray:
    """All frames of camera `key` as uint8 (N, H, W, 3), in dataset-index order: each episode's frames from its
    video file between its from/to timestamps. ValueError when an episode's decoded frames are not its length."""
    import av
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    meta = LeRobotDatasetMetadata(repo_id, root=root)
    episodes = meta.episodes
    total = int(meta.total_frames)
    height, width = meta.features[key]["shape"][:2]
    out = np.zeros((total, height, width, 3), dtype=np.uint8)
    by_file: dict[Path, list[dict]] = {}
    for index in range(len(episodes)):
        episode = episodes[index]
        path = Path(root) / meta.get_video_file_path(int(episode["episode_index"]), key)
        by_file.setdefault(path, []).append(episode)
    fps = float(meta.fps)
    bar = tqdm(total=total, desc=f"decoding {key.rsplit('.', 1)[-1]}", unit="frame", disable=not progress)
    for path, file_episodes in by_file.items():
        # the file's frames by their time, rounded to the frame grid
        frames: dict[int, np.ndarray] = {}
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                frames[round(float(frame.pts * stream.time_base) * fps)] = frame.to_ndarray(format="rgb24")
        for episode in file_episodes:
            start = round(float(episode[f"videos/{key}/from_timestamp"]) * fps)
            first, last = int(episode["dataset_from_index"]), int(episode["dataset_to_index"])
            wanted = range(start, start + last - first)
            missing = [tick for tick in wanted if tick not in frames]
            if missing:
                raise ValueError(f"{path}: episode {episode['episode_index']} needs frames {wanted.start}-"
                                 f"{wanted.stop - 1}, {len(missing)} of them are not in the video (first {missing[0]})")
            out[first:last] = np.stack([frames[tick] for tick in wanted])
            bar.update(last - first)
    bar.close()
    return out


@torch.no_grad()
def backbone_maps(backbone: torch.nn.Module, images: np.ndarray, batch: int = BATCH) -> np.ndarray:
    """layer4 maps (N, 512, h, w) float16 of uint8 images (N, H, W, 3) through ACT's backbone."""
    backbone.eval()
    out = []
    for start in range(0, len(images), batch):
        out.append(backbone(images_to_tensor(images[start:start + batch]))["feature_map"].to(torch.float16).numpy())
    return np.concatenate(out)


class RawMaps:
    """The backbone's maps of the raw renders, one file an episode, written while `record()` records.

    record() calls add(observation) for every frame it gives the dataset, discard() when it drops the episode
    in progress and save(index) just before LeRobot saves it as episode `index` (so a stop between the two
    leaves a file that the next save of that index overwrites, never an episode without its maps).
    DIR/maps.json pins the backbone (sha256); a DIR of another backbone is refused."""

    def __init__(self, out: Path, backbone_path: Path, batch: int = BATCH):
        self.out, self.backbone_path, self.batch = Path(out), Path(backbone_path), batch
        if not self.backbone_path.is_file():
            raise FileNotFoundError(f"no backbone at {self.backbone_path} (--raw-maps needs the encoder's "
                                    "backbone.safetensors)")
        self.sha256 = file_sha256(self.backbone_path)
        self.out.mkdir(parents=True, exist_ok=True)
        described = self.out / "maps.json"
        if described.is_file():
            there = json.loads(described.read_text()).get("backbone_sha256")
            if there != self.sha256:
                raise ValueError(f"{self.out} holds maps of another backbone (sha256 {there}, this one "
                                 f"{self.sha256}): use another directory, or delete it")
        else:
            described.write_text(json.dumps({"backbone": str(self.backbone_path.resolve()),
                                             "backbone_sha256": self.sha256}, indent=1) + "\n")
        self.backbone = act_backbone(self.backbone_path)
        self.frames: dict[str, list[np.ndarray]] = {}

    def add(self, observation: dict) -> None:
        pixels = observation.get("pixels") or {}
        if not pixels:
            raise ValueError("raw maps need camera images: the observation has none (record with --cameras)")
        if self.frames and set(pixels) != set(self.frames):
            raise ValueError(f"cameras changed within an episode: {sorted(self.frames)} then {sorted(pixels)}")
        for camera, image in pixels.items():
            self.frames.setdefault(camera, []).append(np.array(image, dtype=np.uint8, copy=True))

    def discard(self) -> None:
        self.frames = {}

    def path(self, episode_index: int) -> Path:
        return self.out / f"episode_{episode_index:06d}.npz"

    def save(self, episode_index: int) -> None:
        if not self.frames:
            raise ValueError(f"episode {episode_index}: no frames to compute maps of")
        maps = {camera: backbone_maps(self.backbone, np.stack(images), self.batch)
                for camera, images in self.frames.items()}
        partial = self.path(episode_index).with_suffix(".partial.npz")
        np.savez(partial, **maps)
        os.replace(partial, self.path(episode_index))
        self.frames = {}


def episode_lengths(dataset_root: Path) -> np.ndarray:
    """Frames per episode, in episode order, from the dataset's data parquet files."""
    import pyarrow.parquet as pq

    paths = sorted((Path(dataset_root) / "data").rglob("*.parquet"))
    if not paths:
        return np.zeros(0, dtype=np.int64)
    indices = np.concatenate([pq.read_table(path, columns=["episode_index"])["episode_index"].to_numpy()
                              for path in paths])
    return np.bincount(indices.astype(np.int64))


def assemble_raw_maps(raw: Path, dataset: DatasetFrames, sha256: str, camera: str) -> np.ndarray:
    """One camera's maps (N, 512, h, w) in dataset-index order from RawMaps files; ValueError names the first
    episode missing or of the wrong length, or another backbone."""
    raw = Path(raw)
    described = raw / "maps.json"
    if not described.is_file():
        raise FileNotFoundError(f"{raw} holds no raw maps (maps.json missing): record with --raw-maps {raw}")
    there = json.loads(described.read_text()).get("backbone_sha256")
    if there != sha256:
        raise ValueError(f"{raw} holds maps of another backbone (sha256 {there}, the cache's {sha256})")
    lengths = episode_lengths(dataset.root)
    if len(lengths) != dataset.episodes or int(lengths.sum()) != dataset.frames:
        raise ValueError(f"{dataset.root}: its data files hold {len(lengths)} episodes and {int(lengths.sum())} "
                         f"frames, its info.json {dataset.episodes} and {dataset.frames}")
    blocks = []
    for index, length in enumerate(tqdm(lengths, desc=f"raw maps {camera}", unit="episode")):
        path = raw / f"episode_{index:06d}.npz"
        if not path.is_file():
            raise ValueError(f"episode {index} has no raw maps ({path} missing): recorded without --raw-maps? "
                             "cache from the videos instead (leave --raw-maps out)")
        with np.load(path) as stored:
            if camera not in stored:
                raise ValueError(f"{path} has no maps of camera {camera!r} (it has {sorted(stored)})")
            maps = stored[camera]
        if len(maps) != length:
            raise ValueError(f"{path}: {len(maps)} frames of maps, the dataset's episode {index} has {length}")
        blocks.append(maps)
    return np.concatenate(blocks)


def cache_maps(dataset_root: Path, backbone_path: Path, out: Path, repo_id: str = "local/dataset",
               raw_maps: Path | None = None) -> dict:
    """Write OUT/maps_<camera>.npy for every camera of the dataset (resumable); returns cache.json's content.
    With `raw_maps` (a RawMaps directory) the maps of the raw renders, else those of the decoded videos."""
    dataset = DatasetFrames.read(dataset_root)
    if not Path(backbone_path).is_file():
        raise FileNotFoundError(f"no backbone at {backbone_path}: run the encoder stage first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = {"dataset": dataset.fingerprint(), "backbone": str(Path(backbone_path).resolve()),
              "backbone_sha256": file_sha256(Path(backbone_path)),
              "source": "raw renders" if raw_maps is not None else "decoded video"}
    described = out / "cache.json"
    if described.is_file():
        there = json.loads(described.read_text())
        if {key: there.get(key) for key in wanted} != wanted:
            raise SystemExit(f"{out} holds maps of another dataset or backbone ({described}): use another --out, "
                             "or delete it")
        if all((out / f"maps_{camera_name(key)}.npy").is_file() for key in dataset.cameras):
            return there
    described.write_text(json.dumps({**wanted, "complete": False}, indent=1) + "\n")
    backbone = act_backbone(Path(backbone_path)) if raw_maps is None else None
    partial = out / "partial"
    for key in dataset.cameras:
        name = camera_name(key)
        final = out / f"maps_{name}.npy"
        if final.is_file():
            continue
        if raw_maps is not None:
            scratch = final.with_name(final.stem + ".tmp.npy")
            np.save(scratch, assemble_raw_maps(Path(raw_maps), dataset, wanted["backbone_sha256"], name))
            os.replace(scratch, final)
            continue
        images = decode_camera(dataset.root, key, repo_id)
        partial.mkdir(exist_ok=True)
        blocks = []
        for start in tqdm(range(0, dataset.frames, BLOCK), desc=f"maps {name}", unit="block"):
            block = partial / f"{name}_{start // BLOCK:04d}.npy"
            if not block.is_file():
                scratch = block.with_name(block.stem + ".tmp.npy")
                np.save(scratch, backbone_maps(backbone, images[start:start + BLOCK]))
                os.replace(scratch, block)
            blocks.append(block)
        maps = np.concatenate([np.load(block) for block in blocks])
        scratch = final.with_name(final.stem + ".tmp.npy")
        np.save(scratch, maps)
        os.replace(scratch, final)
        for block in blocks:
            block.unlink()
    shutil.rmtree(partial, ignore_errors=True)
    content = {**wanted, "complete": True, "cameras": [camera_name(key) for key in dataset.cameras],
               "map_shape": list(np.load(out / f"maps_{camera_name(dataset.cameras[0])}.npy", mmap_mode="r").shape[1:])}
    described.write_text(json.dumps(content, indent=1) + "\n")
    return content


def camera_name(key: str) -> str:
    return key.removeprefix("observation.images.")


def load_maps(out: Path, cameras: list[str]) -> dict[str, np.ndarray]:
    """{camera: maps (N, 512, h, w) float16} of a complete cache."""
    described = Path(out) / "cache.json"
    if not described.is_file() or not json.loads(described.read_text()).get("complete"):
        raise FileNotFoundError(f"no complete map cache at {out}: run the cache stage")
    return {camera: np.load(Path(out) / f"maps_{camera}.npy") for camera in cameras}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m act_lab.vision.cache", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", required=True, help="LeRobotDataset root with the camera videos")
    parser.add_argument("--backbone", required=True, help="backbone.safetensors of the encoder stage")
    parser.add_argument("--out", required=True)
    parser.add_argument("--raw-maps", default=None, help="the maps of the raw renders that act-sim record "
                        "--raw-maps wrote (default: decode the videos)")
    args = parser.parse_args(argv)
    try:
        content = cache_maps(Path(args.dataset), Path(args.backbone), Path(args.out),
                             raw_maps=Path(args.raw_maps) if args.raw_maps else None)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"python -m act_lab.vision.cache: {error}") from None
    print(json.dumps(content, indent=1))


if __name__ == "__main__":
    main()
