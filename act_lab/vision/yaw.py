"""Making the yaw reader (act_node.perception.yaw, models/yaw_reader): scenes at reset, the head's training.

    act-lab yaw scenes --out DIR/train.npz --first-seed 700000 --count 8000
    act-lab yaw scenes --out DIR/val.npz --first-seed 800000 --count 1000
    act-lab yaw train --data DIR --out models/yaw_reader

(How long each takes: results/act_yaw/README.md.)
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
from safetensors.torch import save_file

from act_node.checkpoints import file_sha256
from act_node.paths import models_dir
from act_node.perception.backbone import act_backbone
from act_node.perception.yaw import (
    CONFIG_FILE,
    DEFAULT_READER,
    HEAD_FILE,
    READER_CAMERAS,
    READER_IMAGE_SIZE,
    YawHead,
    kind_turns,
    symmetric_yaw,
)
from act_node.table_frame import KIND_NAMES, kind_index


def yaw_error_deg(predicted: np.ndarray, truth: np.ndarray, turns: np.ndarray | int) -> np.ndarray:
    """The object's yaw error in degrees: the error on the k*yaw circle divided by k."""
    diff = np.arctan2(predicted[..., 1], predicted[..., 0]) - np.arctan2(truth[..., 1], truth[..., 0])
    diff = np.abs((diff + np.pi) % (2 * np.pi) - np.pi)
    return np.degrees(diff) / np.maximum(turns, 1)


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

    from act_lab.vision.cache import backbone_maps
    from act_node.tabletop.env import PickObjectEnv

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
        raise FileNotFoundError(f"{data_dir}: expected train*.npz and val.npz (act-lab yaw scenes)")
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
    parser = argparse.ArgumentParser(prog="act-lab yaw", description=__doc__,
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
