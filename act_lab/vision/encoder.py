"""The recipe's first stage as one command: the vision encoder, pretrained on this table-top, as ACT's backbone.

    python -m act_lab.vision.encoder --out outputs/recipe/encoder [--frames N] [--epochs N] [--resume]

It does what is missing, in order, and says what it skipped:
  1. frames     OUT/frames/{train,val}_NNNN.npz: labelled images (frames.py), resumable shard by shard
  2. baseline   OUT/baseline.json: the heads on a frozen random trunk (train.baseline)
  3. training   OUT/checkpoints/last.pt, OUT/history.json: continues the newest checkpoint (train.Trainer)
  4. export     OUT/backbone.safetensors (ACT's `model.backbone.*` keys) and OUT/backbone.json (what it was
                trained on, how long each part took, the metrics of the first and the last epoch and the baseline)
Run again after it finished, it does nothing but say so. OUT/stage.json pins the settings of a run: another
--frames or --epochs on the same folder is refused (use another --out). `--resume` insists on a checkpoint.

Sizing, measured on these 2 cores at nice 19 (first run, outputs/recipe/encoder): generation 75 frames/s with two
workers; the baseline 3 minutes; training about 39 images/s with the cores to itself, 9-17 with a test
suite beside it, 27-30 on average. The defaults (16,000 frames = 32,000 images, 3 epochs = 96,000
image-steps, 1,600 held-out frames) take about 60 minutes on idle cores and 75-90 on shared ones.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import torch

from act_lab.vision.export import write_backbone
from act_lab.vision.frames import CAMERAS, FRAMES_PER_SHARD, IMAGE_SIZE, generate, load_images, shard_specs
from act_lab.vision.networks import Encoder
from act_lab.vision.train import Trainer, TrainSettings, baseline

DEFAULT_FRAMES = 16_000
DEFAULT_EPOCHS = 3
BASELINE_FRAMES = 4_000  # the baseline's heads train on the maps of this many frames' images


def stage_settings(args: argparse.Namespace) -> dict:
    val_frames = args.val_frames or max(FRAMES_PER_SHARD, args.frames // 10)
    return {"frames": args.frames, "val_frames": val_frames, "image_size": list(IMAGE_SIZE),
            "cameras": list(CAMERAS),
            "train": asdict(TrainSettings(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr))}


def _write_json(path: Path, content: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(content, indent=1) + "\n")
    os.replace(partial, path)


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a} there, {b} asked")
    return out


def run(args: argparse.Namespace) -> Path:
    """The stage; returns the backbone's path."""
    out = Path(args.out)
    settings = stage_settings(args)
    backbone = out / "backbone.safetensors"
    pinned = out / "stage.json"
    if pinned.is_file():
        differences = _differences(json.loads(pinned.read_text()), settings)
        if differences:
            raise SystemExit(f"act_lab.vision.encoder: {out} holds a run with other settings ("
                             f"{'; '.join(differences)}): use another --out, or the same settings")
    if backbone.is_file() and backbone.with_suffix(".json").is_file():
        print(f"nothing to do: {backbone} is trained and exported ({backbone.with_suffix('.json')} says how); "
              f"delete {out} to train again")
        return backbone
    if args.resume and not (out / "checkpoints" / "last.pt").is_file():
        raise SystemExit(f"act_lab.vision.encoder: --resume: nothing to resume in {out} (no checkpoints/last.pt)")
    out.mkdir(parents=True, exist_ok=True)
    _write_json(pinned, settings)
    torch.set_num_threads(args.threads)
    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else {}

    train_specs = shard_specs(out / "frames", "train", settings["frames"])
    val_specs = shard_specs(out / "frames", "val", settings["val_frames"])
    for split, specs in (("train", train_specs), ("val", val_specs)):
        report = generate(specs, args.workers, f"{split} frames")
        if report["frames"]:
            timings[f"{split}_frames"] = report
            _write_json(timings_path, timings)
        rate = f", {report['frames_per_s']} frames/s" if report["frames"] else ""
        print(f"{split} frames: {sum(s.frames for s in specs)} in {len(specs)} shards ({report['frames']} "
              f"generated now{rate})")
    started = time.perf_counter()
    train_set = load_images([spec.path for spec in train_specs])
    val_set = load_images([spec.path for spec in val_specs])
    print(f"loaded {len(train_set)} training and {len(val_set)} held-out images in "
          f"{time.perf_counter() - started:.0f} s")

    train_settings = TrainSettings(**settings["train"])
    steps_per_epoch = -(-len(train_set) // train_settings.batch_size)
    baseline_path = out / "baseline.json"
    if args.baseline and not baseline_path.is_file():
        subset = load_images([spec.path for spec in train_specs], limit=BASELINE_FRAMES)
        numbers = baseline(subset, val_set, steps_per_epoch, train_settings, IMAGE_SIZE)
        _write_json(baseline_path, numbers)
        print("baseline:", json.dumps(numbers))
    elif baseline_path.is_file():
        print(f"baseline: done ({baseline_path})")

    torch.manual_seed(train_settings.seed)
    encoder = Encoder(IMAGE_SIZE).to(memory_format=torch.channels_last)
    trainer = Trainer(encoder, train_set, val_set, train_settings, out)
    history = trainer.run()
    epochs = [entry for entry in history if entry["kind"] == "epoch"]
    timings["training"] = {"seconds": round(trainer.train_seconds, 1),
                           "images_per_s": epochs[-1]["train_images_per_s"] if epochs else None}
    _write_json(timings_path, timings)

    encoder.eval()
    about = {"trained_on": {"frames": settings["frames"], "images": len(train_set), "cameras": list(CAMERAS),
                            "image_size": list(IMAGE_SIZE), "renderer": "tiny",
                            "train_seeds_from": train_specs[0].first_seed, "val_seeds_from": val_specs[0].first_seed,
                            "val_frames": settings["val_frames"], "labels": "act_lab/vision/labels.py",
                            "generator": "act_lab/vision/frames.py"},
             "training": settings["train"], "timings": timings, "first_epoch": epochs[0] if epochs else None,
             "last_epoch": epochs[-1] if epochs else None,
             "baseline": json.loads(baseline_path.read_text()) if baseline_path.is_file() else None}
    write_backbone(encoder.trunk, backbone, about)
    print(f"exported {backbone}; last epoch: {json.dumps(epochs[-1]['val']) if epochs else None}")
    return backbone


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("outputs/recipe/encoder"))
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="training frames (two images each)")
    parser.add_argument("--val-frames", type=int, default=None, help="held-out frames (default: a tenth, >= 500)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=TrainSettings.lr)
    parser.add_argument("--workers", type=int, default=2, help="processes generating frames")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip the frozen-random-trunk baseline")
    parser.add_argument("--resume", action="store_true", help="continue the newest checkpoint (refused if none)")
    return parser


def main(argv: list[str] | None = None) -> None:
    run(parser().parse_args(argv))


if __name__ == "__main__":
    main()
