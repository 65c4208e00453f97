"""Train the scene reader (act_node.perception.scene) on scene_frames' shards, resumably, and measure it.

Heat maps are taught with CenterNet's penalty-reduced focal loss (a Gaussian of SIGMA_CELLS around each kind's
centre, 1 at its cell), the centre's offset in its cell and the axis (cos k phi, sin k phi) with L1 at that cell.
Each batch's images are changed further on the way in (brightness, contrast, saturation, channel gains, blur,
sensor noise), beyond what the shards were drawn with. bf16 autocast on the CPU (avx512_bf16 makes it the
cheaper; BatchNorm stays fp32). A checkpoint (weights, optimizer, step) is written every CHECKPOINT_EVERY steps
and a stopped run continues from it.

    python -m act_lab.vision.scene_train --frames outputs/scene_reader/frames --out outputs/scene_reader/run
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_lab.vision.scene_frames import load
from act_node.perception.scene import (
    HALF_HEIGHT_M,
    KIND_NAMES,
    STRIDE,
    TURNS,
    CameraCalibration,
    ReaderConfig,
    SceneReader,
    decode,
    network,
    table_yaw,
)

SIGMA_CELLS = 1.0
CHECKPOINT_EVERY = 250
KINDS = len(KIND_NAMES)


def targets(present: np.ndarray, centre_px: np.ndarray, yaw: np.ndarray, yaw_valid: np.ndarray,
            grid: tuple[int, int]):
    """Batch labels -> torch targets: heat (B, 8, h, w), the centre cells (B, 8) flat indices, offsets (B, 8, 2),
    masks."""
    import torch

    h, w = grid
    cells = centre_px / STRIDE  # (B, 8, 2) continuous cell coordinates (u, v)
    col = np.clip(np.floor(cells[..., 0]), 0, w - 1).astype(np.int64)
    row = np.clip(np.floor(cells[..., 1]), 0, h - 1).astype(np.int64)
    ys, xs = np.arange(h)[:, None] + 0.5, np.arange(w)[None, :] + 0.5
    d2 = (xs[None, None] - cells[..., 0, None, None]) ** 2 + (ys[None, None] - cells[..., 1, None, None]) ** 2
    heat = np.exp(-d2 / (2 * SIGMA_CELLS ** 2)) * present[..., None, None]
    b, k = np.nonzero(present)
    heat[b, k, row[b, k], col[b, k]] = 1.0
    offsets = np.stack([cells[..., 0] - col, cells[..., 1] - row], -1)
    return (torch.from_numpy(heat.astype(np.float32)), torch.from_numpy(row * w + col),
            torch.from_numpy(offsets.astype(np.float32)), torch.from_numpy(present),
            torch.from_numpy(yaw.astype(np.float32)), torch.from_numpy(yaw_valid))


def focal_loss(logits, heat):
    import torch
    from torch.nn import functional as F

    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    positive = heat.eq(1).float()
    pos = -F.logsigmoid(logits) * (1 - p) ** 2 * positive
    neg = -F.logsigmoid(-logits) * p ** 2 * (1 - heat) ** 4 * (1 - positive)
    return (pos.sum() + neg.sum()) / positive.sum().clamp(min=1)


def losses(out, batch_targets):
    """(total, {part: value}) for the network's output on a batch."""
    import torch

    heat, cells, offsets, present, yaw, yaw_valid = batch_targets
    out = out.float()
    b, _, h, w = out.shape
    flat = out.view(b, 5 * KINDS, h * w)
    index = cells[:, :, None].expand(b, KINDS, 1)
    pred_offset = torch.stack([flat[:, KINDS:3 * KINDS:2].gather(2, index)[..., 0],
                               flat[:, KINDS + 1:3 * KINDS:2].gather(2, index)[..., 0]], -1)
    pred_yaw = torch.stack([flat[:, 3 * KINDS::2].gather(2, index)[..., 0],
                            flat[:, 3 * KINDS + 1::2].gather(2, index)[..., 0]], -1)
    mask = present.float()
    offset_loss = ((pred_offset - offsets).abs().sum(-1) * mask).sum() / mask.sum().clamp(min=1)
    ymask = yaw_valid.float()
    yaw_loss = ((pred_yaw - yaw).abs().sum(-1) * ymask).sum() / ymask.sum().clamp(min=1)
    heat_loss = focal_loss(out[:, :KINDS], heat)
    total = heat_loss + offset_loss + 0.5 * yaw_loss
    return total, {"heat": float(heat_loss), "offset": float(offset_loss), "yaw": float(yaw_loss)}


def augment(x, generator):
    """Images (B, 3, H, W) in [0, 1] -> changed in look: brightness, contrast, saturation, channel gains, blur,
    noise (each drawn per image)."""
    import torch
    from torch.nn import functional as F

    b = x.shape[0]

    def uniform(low, high, *shape):
        return low + (high - low) * torch.rand(b, *shape, generator=generator)

    x = x * uniform(0.7, 1.3, 1, 1, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * uniform(0.7, 1.3, 1, 1, 1) + mean
    grey = x.mean(dim=1, keepdim=True)
    x = (x - grey) * uniform(0.7, 1.3, 1, 1, 1) + grey
    x = x * uniform(0.92, 1.08, 3, 1, 1)
    blur = torch.rand(b, generator=generator) < 0.3
    if blur.any():
        sigma = 0.5 + 0.5 * torch.rand(1, generator=generator).item()
        k = torch.exp(-torch.tensor([1.0, 0.0, 1.0]) / (2 * sigma ** 2))
        kernel = (k[:, None] * k[None, :] / (k.sum() ** 2)).expand(3, 1, 3, 3)
        x[blur] = F.conv2d(F.pad(x[blur], (1, 1, 1, 1), mode="replicate"), kernel, groups=3)
    x = x + uniform(0.0, 0.03, 1, 1, 1) * torch.randn(x.shape, generator=generator)
    return x.clamp(0, 1)


def frame_calibration(frames: dict, i: int, size: tuple[int, int]) -> CameraCalibration:
    """The calibration of the camera frame i was drawn with (its own pose and intrinsics)."""
    return CameraCalibration(frames["intrinsics"][i], frames["eye"][i], frames["optical"][i], size)


def distance_summary(metres) -> dict | None:
    """Distances in metres -> their median and p95 in mm and their count (None for none)."""
    values = np.asarray(metres)
    if not len(values):
        return None
    return {"median_mm": round(1000 * float(np.median(values)), 2),
            "p95_mm": round(1000 * float(np.percentile(values, 95)), 2), "n": int(len(values))}


def measure(reader: SceneReader, frames: dict, threshold: float | None = None, batch: int = 64) -> dict:
    """The reader on labelled frames: presence, phantoms, place error in the table (metres, through each frame's
    own calibration), yaw error; `threshold` overrides the reader's."""
    threshold = reader.config.threshold if threshold is None else threshold
    size = tuple(frames["images"].shape[1:3])
    n = len(frames["images"])
    place, yaw_err, by_kind = [], [], {k: [] for k in KIND_NAMES}
    phantom_frames = missed = shown = absent_right = absent_total = 0
    for start in range(0, n, batch):
        maps = reader.maps(frames["images"][start:start + batch])
        for j, m in enumerate(maps):
            i = start + j
            score, pixels, phi = decode(m)
            said = score >= threshold
            in_scene, visible = frames["in_scene"][i], frames["present"][i]
            phantom_frames += bool(np.any(said & ~in_scene))
            missed += int(np.sum(visible & ~said))
            shown += int(np.sum(visible))
            absent_total += int(np.sum(~in_scene))
            absent_right += int(np.sum(~in_scene & ~said))
            rows = np.nonzero(said & in_scene)[0]
            if len(rows):
                calibration = frame_calibration(frames, i, size)
                heights = np.array([HALF_HEIGHT_M[KIND_NAMES[r]] for r in rows])
                xy = calibration.to_table(pixels[rows], heights)
                error = np.hypot(*(xy - frames["table_xy"][i][rows]).T)
                for r, e in zip(rows, error):
                    place.append(e)
                    by_kind[KIND_NAMES[r]].append(e)
                    kind = KIND_NAMES[r]
                    if TURNS[kind] and frames["yaw_valid"][i][r]:
                        period = 2 * math.pi / TURNS[kind]
                        got = table_yaw(calibration, pixels[r], float(phi[r]), kind)
                        d = (got - frames["table_yaw"][i][r]) % period
                        yaw_err.append(math.degrees(min(d, period - d)))
    place = np.array(place)

    return {"frames": n, "threshold": threshold, "place": distance_summary(place),
            "place_by_kind": {k: distance_summary(v) for k, v in by_kind.items()},
            "yaw_deg": {"median": round(float(np.median(yaw_err)), 2),
                        "p95": round(float(np.percentile(yaw_err, 95)), 2)} if yaw_err else None,
            "frames_with_phantom": phantom_frames, "phantom_free_share": round(1 - phantom_frames / n, 4),
            "missed_visible": missed, "visible": shown,
            "absent_right_share": round(absent_right / max(absent_total, 1), 4)}


def train(frames_dir: Path, out: Path, steps: int, batch: int, lr: float, width: int, threads: int,
          bf16: bool = True) -> dict:
    import torch

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    data = load(sorted(frames_dir.glob("train_*.npz")))
    val = load(sorted(frames_dir.glob("val_*.npz")))
    size = tuple(data["images"].shape[1:3])
    grid = (size[0] // STRIDE, size[1] // STRIDE)
    model = network(width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps,
                                                   pct_start=max(0.05, 3 / steps))
    checkpoint, step, history = out / "checkpoint.pt", 0, []
    if checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, history = state["step"], state["history"]
        print(f"resuming at step {step} of {steps} from {checkpoint}")
    started, n = time.perf_counter(), len(data["images"])
    progress = tqdm(total=steps, initial=step, desc="scene reader", unit="step", mininterval=10)
    model.train()
    while step < steps:
        rng = np.random.default_rng([step, 11])
        pick = rng.integers(0, n, batch)
        generator = torch.Generator().manual_seed(step)
        x = torch.from_numpy(data["images"][pick]).permute(0, 3, 1, 2).float() / 255.0
        x = augment(x, generator)
        batch_targets = targets(data["present"][pick], data["centre_px"][pick], data["yaw"][pick],
                                data["yaw_valid"][pick], grid)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            output = model(x)
        loss, parts = losses(output, batch_targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        schedule.step()
        step += 1
        progress.update(1)
        progress.set_postfix(loss=f"{float(loss):.3f}", **{k: f"{v:.3f}" for k, v in parts.items()})
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            reader = SceneReader(model, ReaderConfig(size, width))
            quick = measure(reader, {k: v[:500] for k, v in val.items()})
            model.train()
            history.append({"step": step, "loss": float(loss), **parts, "val_place": quick["place"],
                            "val_phantom_free": quick["phantom_free_share"], "val_missed": quick["missed_visible"]})
            progress.write(json.dumps(history[-1]))
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "schedule": schedule.state_dict(), "step": step, "history": history},
                       str(checkpoint) + ".partial")
            Path(str(checkpoint) + ".partial").replace(checkpoint)
    progress.close()
    reader = SceneReader(model, ReaderConfig(size, width))
    report = measure(reader, val)
    reader.save(out / "reader", trained_on=str(frames_dir), steps=steps, batch=batch,
                seconds_this_run=round(time.perf_counter() - started, 1))
    (out / "history.json").write_text(json.dumps(history, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=Path, required=True, help="scene_frames' folder")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder (checkpoint, reader/)")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fp32", action="store_true", help="train in fp32 (default: bf16 autocast)")
    args = parser.parse_args(argv)
    report = train(args.frames, args.out, args.steps, args.batch, args.lr, args.width, args.threads,
                   bf16=not args.fp32)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
