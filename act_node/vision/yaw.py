"""The yaw reader: the requested object's yaw at reset, read from the front and wrist cameras.

What the image-less ACT lacks for pens, keys and boxes is how they lie: given their yaw at reset (read from the
simulator, privileged) the same training scores 182/300 against 158/300 (results/act_scale). The reader gives
the ACT that yaw from what the real arm has too, its cameras:

  the recipe's frozen encoder (models/tabletop_encoder: LeRobot ACT's ResNet-18, pretrained on this table-top)
  turns each camera's image (96x128, as `act-sim record --height 96 --width 128` draws it) into its layer4 map
  (512 x 3 x 4); a small head shared over the map's cells gives, in every cell, per kind a score (is the kind
  here) and a yaw; a kind's answer is its yaws averaged with the softmax of its scores over the cells of both
  cameras, plus a learned embedding per camera and cell (the image's angle becomes the table's).

The answer is the environment_state layout "target_tool_yaw"'s last two numbers (act_node.table_frame): the
requested kind's (cos k*yaw, sin k*yaw), k its symmetry (a pen 2: both ends take the same grasp; the cube 4),
zeros for a round kind. Read once an episode, at its first observation, before anything moved.

    reader = YawReader.load()                                  # models/yaw_reader
    reader.read({"front": rgb, "wrist": rgb}, "pen")           # (2,) float32

    python -m act_node.vision.yaw scenes --out DIR/train.npz --first-seed 700000 --count 8000   # 5.5 min here
    python -m act_node.vision.yaw scenes --out DIR/val.npz --first-seed 800000 --count 1000
    python -m act_node.vision.yaw train --data DIR --out models/yaw_reader                       # 2 min
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from act_node.paths import models_dir
from act_node.table_frame import KIND_NAMES, YAW_READER_CAMERAS, YAW_READER_IMAGE_SIZE, kind_index
from act_node.vision.cache import file_sha256, images_to_tensor

READER_CAMERAS = YAW_READER_CAMERAS
READER_IMAGE_SIZE = YAW_READER_IMAGE_SIZE  # (height, width): the encoder's and the recipe's
DEFAULT_READER = "yaw_reader"
HEAD_FILE = "head.safetensors"
CONFIG_FILE = "reader.json"
MAP_SIZE = (3, 4)  # layer4 of 96x128


def kind_turns(kind: str) -> int:
    """How many grasp directions of the kind are alike in a turn (0: round, no yaw)."""
    from act_node.tabletop.objects import kind as object_kind

    kind_index(kind)  # ValueError naming the kinds
    return int(object_kind(kind).grasp_turns)


def symmetric_yaw(kind: str, yaw: float) -> np.ndarray:
    """(cos k*yaw, sin k*yaw) for a kind of symmetry k; zeros for a round one. (2,) float32."""
    turns = kind_turns(kind)
    if turns == 0:
        return np.zeros(2, np.float32)
    return np.array([math.cos(turns * yaw), math.sin(turns * yaw)], np.float32)


def yaw_error_deg(predicted: np.ndarray, truth: np.ndarray, turns: np.ndarray | int) -> np.ndarray:
    """The object's yaw error in degrees: the error on the k*yaw circle divided by k."""
    diff = np.arctan2(predicted[..., 1], predicted[..., 0]) - np.arctan2(truth[..., 1], truth[..., 0])
    diff = np.abs((diff + np.pi) % (2 * np.pi) - np.pi)
    return np.degrees(diff) / np.maximum(turns, 1)


class YawHead(nn.Module):
    """Layer4 maps of both cameras (N, 2, 512, h, w) -> (N, 8, 2): per kind (cos k*yaw, sin k*yaw), not normalized."""

    def __init__(self, map_size: tuple[int, int] = MAP_SIZE, width: int = 128, dropout: float = 0.1):
        super().__init__()
        self.reduce = nn.ModuleList([nn.Conv2d(512, width, 1) for _ in READER_CAMERAS])
        self.place = nn.Parameter(torch.zeros(len(READER_CAMERAS), width, *map_size))
        self.out = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Conv2d(width, width, 1), nn.ReLU(),
                                 nn.Conv2d(width, len(KIND_NAMES) * 3, 1))

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        cells = []
        for c, reduce in enumerate(self.reduce):
            out = self.out(reduce(maps[:, c].float()) + self.place[c])  # (N, 8 * 3, h, w)
            cells.append(out.reshape(len(out), len(KIND_NAMES), 3, -1))
        cells = torch.cat(cells, -1)  # (N, 8, 3, the cells of both cameras)
        weights = torch.softmax(cells[:, :, 0], -1)
        return (cells[:, :, 1:] * weights[:, :, None]).sum(-1)


class YawReader:
    """The encoder's backbone and the yaw head: camera images at reset -> the requested kind's yaw numbers."""

    def __init__(self, backbone: nn.Module, head: YawHead, folder: Path, about: dict):
        self.backbone, self.head, self.folder, self.about = backbone.eval(), head.eval(), folder, about

    @classmethod
    def load(cls, folder: str | Path | None = None) -> YawReader:
        """models/yaw_reader, or `folder`: reader.json names the backbone (a folder under models/ or a path) and
        its sha256; FileNotFoundError or ValueError naming what is missing or does not match."""
        from act_node.vision.cache import act_backbone

        folder = Path(folder) if folder is not None else models_dir() / DEFAULT_READER
        config_path, head_path = folder / CONFIG_FILE, folder / HEAD_FILE
        for path in (config_path, head_path):
            if not path.is_file():
                raise FileNotFoundError(f"yaw reader {folder}: no {path.name} (expected {CONFIG_FILE} and {HEAD_FILE})")
        try:
            about = json.loads(config_path.read_text())
            named = Path(about["backbone"])
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"yaw reader {folder}: {CONFIG_FILE} does not name its backbone ({error!r})") from None
        backbone_path = named if named.is_absolute() else models_dir() / named
        if not backbone_path.is_file():
            raise FileNotFoundError(f"yaw reader {folder}: its backbone {backbone_path} is missing")
        if about.get("backbone_sha256") and file_sha256(backbone_path) != about["backbone_sha256"]:
            raise ValueError(f"yaw reader {folder} was trained on another backbone than {backbone_path} (sha256 "
                             f"differs): its head reads that backbone's maps only")
        head = YawHead()
        state = load_file(str(head_path))
        expected = {key: tuple(value.shape) for key, value in head.state_dict().items()}
        found = {key: tuple(value.shape) for key, value in state.items()}
        if found != expected:
            raise ValueError(f"yaw reader {folder}: {HEAD_FILE} is not a yaw head (keys or shapes differ: "
                             f"{sorted(set(found.items()) ^ set(expected.items()))[:4]})")
        head.load_state_dict(state)
        return cls(act_backbone(backbone_path), head, folder, about)

    @torch.no_grad()
    def maps(self, images: Mapping[str, np.ndarray]) -> torch.Tensor:
        """{camera: (H, W, 3) uint8} -> (1, 2, 512, 3, 4); ValueError naming a missing or misshapen image. A frame
        of another size than the reader's 96x128 is resized to it first, as LeRobot's processors resize
        (act_node.policy.resized_frame): a camera of any size, with the same field of view, reads the same."""
        from act_node.policy import resized_frame

        tensors = []
        for camera in READER_CAMERAS:
            if camera not in images:
                raise ValueError(f"the yaw reader needs the {camera!r} camera's image; got {sorted(images)}")
            image = np.asarray(images[camera])
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise ValueError(f"the yaw reader reads {camera!r} images of (H, W, 3) uint8, got "
                                 f"{image.shape} {image.dtype}")
            tensors.append(images_to_tensor(resized_frame(image, READER_IMAGE_SIZE)[None]))
        return torch.stack([self.backbone(t)["feature_map"] for t in tensors], 1)

    @torch.no_grad()
    def read(self, images: Mapping[str, np.ndarray], request: str) -> np.ndarray:
        """The requested kind's (cos k*yaw, sin k*yaw), unit length; zeros for a round kind. (2,) float32."""
        row = kind_index(request)
        if kind_turns(request) == 0:
            return np.zeros(2, np.float32)
        value = self.head(self.maps(images))[0, row].numpy()
        return (value / max(float(np.linalg.norm(value)), 1e-6)).astype(np.float32)


# --- making one ----------------------------------------------------------------------------------------------

def kind_yaws(table) -> tuple[np.ndarray, np.ndarray]:
    """(8, 2) every kind's symmetric yaw on `table` now and (8,) whether the kind lies there with a yaw."""
    yaws, valid = np.zeros((len(KIND_NAMES), 2), np.float32), np.zeros(len(KIND_NAMES), bool)
    for state in table.task.object_states():
        row = kind_index(state.kind)
        if kind_turns(state.kind) > 0:
            yaws[row], valid[row] = symmetric_yaw(state.kind, state.yaw), True
    return yaws, valid


def scenes(out: Path, first_seed: int, count: int, backbone_path: Path) -> None:
    """Reset `count` scenes (4 objects on even seeds, 6 on odd) and keep both cameras' maps and every kind's yaw."""
    from tqdm import tqdm

    from act_node.tabletop.env import PickObjectEnv
    from act_node.vision.cache import act_backbone, backbone_maps

    envs = {n: PickObjectEnv(objects=n, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, renderer="tiny")
            for n in (4, 6)}
    images = np.zeros((count, len(READER_CAMERAS), *READER_IMAGE_SIZE, 3), np.uint8)
    yaws, valid = np.zeros((count, len(KIND_NAMES), 2), np.float32), np.zeros((count, len(KIND_NAMES)), bool)
    requests = np.zeros(count, np.int64)
    for i in tqdm(range(count), desc=f"scenes from {first_seed}"):
        env = envs[4 if (first_seed + i) % 2 == 0 else 6]
        observation, _ = env.reset(seed=first_seed + i)
        images[i] = np.stack([observation["pixels"][c] for c in READER_CAMERAS])
        yaws[i], valid[i] = kind_yaws(env.table)
        requests[i] = kind_index(env.scene.request)
    for env in envs.values():
        env.close()
    backbone = act_backbone(backbone_path)
    maps = np.stack([backbone_maps(backbone, images[:, c]) for c in range(len(READER_CAMERAS))], axis=1)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.stem + ".partial.npz")
    np.savez(partial, maps=maps, yaws=yaws, valid=valid, requests=requests, first_seed=first_seed)
    partial.replace(out)
    print(f"{out}: {count} scenes, maps {maps.shape}, {int(valid.sum())} yaw labels")


def errors(head: YawHead, data: Mapping[str, np.ndarray]) -> dict:
    """Median and 90th-percentile yaw error by kind, and on the requested kind, in degrees."""
    head.eval()
    with torch.no_grad():
        predicted = torch.cat([head(torch.from_numpy(data["maps"][s:s + 512]))
                               for s in range(0, len(data["maps"]), 512)]).numpy()
    turns = np.array([kind_turns(kind) for kind in KIND_NAMES])
    valid = data["valid"]
    error = yaw_error_deg(predicted, data["yaws"], turns[None, :])
    by_kind = {kind: {"median_deg": round(float(np.median(error[valid[:, k], k])), 2),
                      "p90_deg": round(float(np.quantile(error[valid[:, k], k], 0.9)), 2),
                      "count": int(valid[:, k].sum())}
               for k, kind in enumerate(KIND_NAMES) if turns[k] > 0 and valid[:, k].any()}
    rows = np.arange(len(valid))
    requested = valid[rows, data["requests"]]
    requested_error = error[rows, data["requests"]][requested]
    return {"by_kind": by_kind, "requested_median_deg": round(float(np.median(requested_error)), 2),
            "requested_count": int(requested.sum())}


def train(data_dir: Path, out: Path, backbone_path: Path, epochs: int = 30, seed: int = 0) -> dict:
    """The head on DIR/train*.npz, held out on DIR/val.npz; writes out/head.safetensors and out/reader.json."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    parts = [dict(np.load(path)) for path in sorted(data_dir.glob("train*.npz")) if ".partial" not in path.name]
    if not parts or not (data_dir / "val.npz").is_file():
        raise FileNotFoundError(f"{data_dir}: expected train*.npz and val.npz (python -m act_node.vision.yaw scenes)")
    data = {key: np.concatenate([part[key] for part in parts]) for key in ("maps", "yaws", "valid", "requests")}
    held_out = dict(np.load(data_dir / "val.npz"))
    maps, yaws = torch.from_numpy(data["maps"]), torch.from_numpy(data["yaws"])
    valid = torch.from_numpy(data["valid"]).float()
    head = YawHead(map_size=tuple(maps.shape[-2:]))
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3, weight_decay=1e-2)
    batch = 128
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=epochs * math.ceil(len(maps) / batch))
    started = time.monotonic()
    for _ in tqdm(range(epochs), desc="yaw head (epochs)"):
        head.train()
        order = torch.randperm(len(maps))
        for start in range(0, len(maps), batch):
            rows = order[start:start + batch]
            squared = ((head(maps[rows]) - yaws[rows]) ** 2).sum(-1)
            loss = (squared * valid[rows]).sum() / valid[rows].sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    out.mkdir(parents=True, exist_ok=True)
    save_file({key: value.contiguous() for key, value in head.state_dict().items()}, str(out / HEAD_FILE))
    try:
        backbone_name = str(backbone_path.resolve().relative_to(models_dir().resolve()))
    except ValueError:
        backbone_name = str(backbone_path.resolve())
    about = {"backbone": backbone_name, "backbone_sha256": file_sha256(backbone_path), "cameras": list(READER_CAMERAS),
             "image_size": list(READER_IMAGE_SIZE), "epochs": epochs, "seed": seed, "train_scenes": len(maps),
             "train_seeds_from": [int(part["first_seed"]) for part in parts], "val_scenes": len(held_out["maps"]),
             "val_seeds_from": int(held_out["first_seed"]), "train_seconds": round(time.monotonic() - started, 1),
             "held_out": errors(head, held_out), "train": errors(head, data)}
    (out / CONFIG_FILE).write_text(json.dumps(about, indent=1) + "\n")
    return about


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m act_node.vision.yaw", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("scenes", help="render scenes at reset and keep the backbone's maps and every kind's yaw")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--first-seed", type=int, required=True)
    s.add_argument("--count", type=int, required=True)
    t = sub.add_parser("train", help="train the head on DIR/train*.npz, held out on DIR/val.npz")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, default=None, help=f"default models/{DEFAULT_READER}")
    t.add_argument("--epochs", type=int, default=30)
    for p in (s, t):
        p.add_argument("--backbone", type=Path, default=models_dir() / "tabletop_encoder" / "backbone.safetensors")
    args = parser.parse_args(argv)
    if args.command == "scenes":
        scenes(args.out, args.first_seed, args.count, args.backbone)
    else:
        about = train(args.data, args.out or models_dir() / DEFAULT_READER, args.backbone, args.epochs)
        print(json.dumps(about["held_out"], indent=1))


if __name__ == "__main__":
    main()
