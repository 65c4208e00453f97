"""The recipe's cache stage: every recorded frame's camera images through the frozen backbone, once.

ACT's backbone has FrozenBatchNorm2d and, frozen for ACT's training, no gradient: its layer4 map of a frame is
the same at every step, so ACT trains on the maps computed here (512 x 3 x 4 a camera, float16) instead of
running ResNet-18 forward for every sample. What the policy reads at run time is the same: the checkpoint
keeps the backbone and LeRobot runs it on the camera images.

    python -m act_node.vision.cache --dataset outputs/recipe/data \
        --backbone outputs/recipe/encoder/backbone.safetensors --out outputs/recipe/cache

Layout of OUT: maps_<camera>.npy (N, 512, h, w) float16 in dataset-index order; cache.json says which dataset
(its frame and episode counts) and which backbone (sha256) made them. A camera's maps are computed in blocks of
BLOCK frames, each saved as it ends (OUT/partial/<camera>_NNNN.npy), so a stopped run resumes at the first
block missing; another dataset or backbone in the same OUT is refused.

Images come from the dataset's own videos, decoded in order with PyAV (what LeRobot's pyav backend decodes),
converted as LeRobot converts them: float32 RGB in [0, 1], channels first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

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


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> float32 (N, 3, H, W) in [0, 1], as LeRobot's dataset hands images to a policy."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).to(torch.float32).div_(255.0)


@torch.no_grad()
def backbone_maps(backbone: torch.nn.Module, images: np.ndarray, batch: int = BATCH) -> np.ndarray:
    """layer4 maps (N, 512, h, w) float16 of uint8 images (N, H, W, 3) through ACT's backbone."""
    backbone.eval()
    out = []
    for start in range(0, len(images), batch):
        out.append(backbone(images_to_tensor(images[start:start + batch]))["feature_map"].to(torch.float16).numpy())
    return np.concatenate(out)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def act_backbone(backbone_path: Path) -> torch.nn.Module:
    """ACT's backbone (lerobot's own construction: resnet18 layer4, FrozenBatchNorm2d) holding the weights at
    `backbone_path` (vision.export's format)."""
    from act_node.vision.export import load_backbone, one_camera_act

    dilation = False
    description = Path(backbone_path).with_suffix(".json")
    if description.is_file():
        dilation = bool(json.loads(description.read_text()).get("replace_final_stride_with_dilation", False))
    policy = one_camera_act(dilation)
    load_backbone(policy, backbone_path)
    return policy.model.backbone.eval()


def cache_maps(dataset_root: Path, backbone_path: Path, out: Path, repo_id: str = "local/dataset") -> dict:
    """Write OUT/maps_<camera>.npy for every camera of the dataset (resumable); returns cache.json's content."""
    dataset = DatasetFrames.read(dataset_root)
    if not Path(backbone_path).is_file():
        raise FileNotFoundError(f"no backbone at {backbone_path}: run the encoder stage first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = {"dataset": dataset.fingerprint(), "backbone": str(Path(backbone_path).resolve()),
              "backbone_sha256": file_sha256(Path(backbone_path))}
    described = out / "cache.json"
    if described.is_file():
        there = json.loads(described.read_text())
        if {key: there.get(key) for key in wanted} != wanted:
            raise SystemExit(f"{out} holds maps of another dataset or backbone ({described}): use another --out, "
                             "or delete it")
        if all((out / f"maps_{camera_name(key)}.npy").is_file() for key in dataset.cameras):
            return there
    described.write_text(json.dumps({**wanted, "complete": False}, indent=1) + "\n")
    backbone = act_backbone(Path(backbone_path))
    partial = out / "partial"
    for key in dataset.cameras:
        name = camera_name(key)
        final = out / f"maps_{name}.npy"
        if final.is_file():
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
    parser = argparse.ArgumentParser(prog="python -m act_node.vision.cache", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", required=True, help="LeRobotDataset root with the camera videos")
    parser.add_argument("--backbone", required=True, help="backbone.safetensors of the encoder stage")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(cache_maps(Path(args.dataset), Path(args.backbone), Path(args.out)), indent=1))


if __name__ == "__main__":
    main()
