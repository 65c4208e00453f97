"""Pretraining the encoder (networks.Encoder) on the labelled frames, and the baseline it is measured against.

    trainer = Trainer(Encoder((96, 128)), train_set, val_set, TrainSettings(epochs=2), Path("run"))
    history = trainer.run()          # resumes run/checkpoints/last.pt when there is one
    numbers = baseline(train_set, val_set, steps=375, settings=TrainSettings())

Training: AdamW on trunk and heads, a linear warm-up then a cosine decay to MIN_LR_SHARE of the peak, batches
drawn from a seeded permutation per epoch (a resumed epoch skips the batches done). Validation on the
held-out shards after every epoch (eval mode: BatchNorm2d's running statistics, i.e. what the export freezes),
and a PROBE_IMAGES-image probe of it every PROBE_EVERY_S so that a long epoch shows its progress. A checkpoint
(model, optimizer, step, history) is written atomically every `checkpoint_s` seconds and at each epoch's end.

The baseline: the same heads on ACT's backbone as it starts when trained from scratch (random init, its
FrozenBatchNorm2d buffers at their identity values = a BatchNorm2d in eval mode at init), frozen; its layer4
maps are computed once (standardised per channel), the heads trained for the same number of steps as one
pretraining epoch.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from act_lab.vision.frames import ImageSet
from act_lab.vision.networks import Encoder, Heads, Metrics, act_trunk, images_to_tensor, losses, targets

MIN_LR_SHARE = 0.05
PROBE_EVERY_S = 600.0
PROBE_IMAGES = 512
EVAL_BATCH = 128


@dataclass(frozen=True)
class TrainSettings:
    epochs: int = 2
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 150
    checkpoint_s: float = 300.0  # seconds between checkpoints within an epoch
    seed: int = 0

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs} and {self.batch_size}")
        if not 0 < self.lr < 1 or self.weight_decay < 0 or self.warmup_steps < 0 or self.checkpoint_s <= 0:
            raise ValueError(f"lr must be in (0, 1), weight_decay, warmup_steps >= 0, checkpoint_s > 0; got {self}")


def lr_share(step: int, total: int, warmup: int) -> float:
    """The learning rate at `step` as a share of the peak: linear warm-up, then cosine to MIN_LR_SHARE."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(total - warmup, 1), 1.0)
    return MIN_LR_SHARE + (1 - MIN_LR_SHARE) * 0.5 * (1 + math.cos(math.pi * progress))


def batch_targets(images: ImageSet, index: np.ndarray, image_size: tuple[int, int],
                  map_size: tuple[int, int]) -> dict[str, torch.Tensor]:
    return targets({name: values[index] for name, values in images.labels.items()}, images.camera[index],
                   image_size, map_size)


@torch.no_grad()
def evaluate(encoder: Encoder, images: ImageSet, limit: int | None = None) -> dict[str, float]:
    """Validation metrics (networks.Metrics) and the mean loss, in eval mode, over `images` (the first `limit`
    of a fixed shuffle when given, both cameras alike)."""
    was_training = encoder.training
    encoder.eval()
    order = np.arange(len(images))
    if limit is not None and limit < len(images):
        order = np.random.default_rng(0).permutation(len(images))[:limit]
    metrics, loss_sum, seen = Metrics(), 0.0, 0
    for start in range(0, len(order), EVAL_BATCH):
        index = order[start:start + EVAL_BATCH]
        outputs = encoder(images_to_tensor(images.images[index]))
        target = batch_targets(images, index, encoder.image_size, encoder.heads.map_size)
        loss_sum += float(losses(outputs, target)["total"]) * len(index)
        seen += len(index)
        metrics.update(outputs, target, images.camera[index])
    encoder.train(was_training)
    return {"loss": round(loss_sum / max(seen, 1), 4), **metrics.result()}


class Trainer:
    """Trains `encoder` on `train_set`, validating on `val_set`; its files live under `folder`."""

    def __init__(self, encoder: Encoder, train_set: ImageSet, val_set: ImageSet, settings: TrainSettings,
                 folder: Path):
        self.encoder, self.train_set, self.val_set, self.settings = encoder, train_set, val_set, settings
        self.folder = Path(folder)
        self.steps_per_epoch = math.ceil(len(train_set) / settings.batch_size)
        self.total_steps = self.steps_per_epoch * settings.epochs
        self.optimizer = torch.optim.AdamW(encoder.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
        self.step = 0
        self.train_seconds = 0.0
        self.history: list[dict] = []

    @property
    def checkpoint_path(self) -> Path:
        return self.folder / "checkpoints" / "last.pt"

    def save(self) -> None:
        """Atomically: a reader finds the previous checkpoint or this one, never half of one."""
        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checkpoint_path.with_name("last.pt.partial")
        torch.save({"encoder": self.encoder.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "step": self.step, "train_seconds": self.train_seconds, "history": self.history,
                    "settings": asdict(self.settings), "train_images": len(self.train_set)}, partial)
        os.replace(partial, self.checkpoint_path)
        history = self.folder / "history.json"
        partial = history.with_name("history.json.partial")
        partial.write_text(json.dumps(self.history, indent=1) + "\n")
        os.replace(partial, history)

    def restore(self) -> bool:
        """Continue the newest checkpoint, if there is one; ValueError when it was trained otherwise."""
        if not self.checkpoint_path.is_file():
            return False
        saved = torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        if saved["settings"] != asdict(self.settings) or saved["train_images"] != len(self.train_set):
            raise ValueError(f"{self.checkpoint_path} was trained with {saved['settings']} on "
                             f"{saved['train_images']} images; this run has {asdict(self.settings)} on "
                             f"{len(self.train_set)}: use another output folder, or the same settings")
        self.encoder.load_state_dict(saved["encoder"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.step, self.train_seconds, self.history = saved["step"], saved["train_seconds"], saved["history"]
        tqdm.write(f"resuming {self.checkpoint_path}: step {self.step} of {self.total_steps}")
        return True

    def run(self, stop_at_step: int | None = None) -> list[dict]:
        """Train to the last epoch (from the checkpoint when there is one); returns the history. `stop_at_step`
        ends the run there after a checkpoint, as a run stopped then would have left it (tests resume so)."""
        self.restore()
        settings, encoder = self.settings, self.encoder
        encoder.train()
        last_save = last_probe = time.perf_counter()
        while self.step < self.total_steps:
            epoch, done = divmod(self.step, self.steps_per_epoch)
            order = np.random.default_rng([settings.seed, epoch]).permutation(len(self.train_set))
            progress = tqdm(total=self.steps_per_epoch, initial=done, desc=f"epoch {epoch + 1}/{settings.epochs}",
                            unit="step", mininterval=10.0)
            epoch_loss, epoch_batches = 0.0, 0
            for batch in range(done, self.steps_per_epoch):
                started = time.perf_counter()
                index = order[batch * settings.batch_size:(batch + 1) * settings.batch_size]
                for group in self.optimizer.param_groups:
                    group["lr"] = settings.lr * lr_share(self.step, self.total_steps, settings.warmup_steps)
                terms = losses(encoder(images_to_tensor(self.train_set.images[index])),
                               batch_targets(self.train_set, index, encoder.image_size, encoder.heads.map_size))
                self.optimizer.zero_grad(set_to_none=True)
                terms["total"].backward()
                self.optimizer.step()
                self.step += 1
                self.train_seconds += time.perf_counter() - started
                loss = float(terms["total"].detach())
                epoch_loss, epoch_batches = epoch_loss + loss, epoch_batches + 1
                images_per_s = self.step * settings.batch_size / max(self.train_seconds, 1e-9)
                progress.update(1)
                progress.set_postfix(loss=f"{loss:.3f}", img_s=f"{images_per_s:.1f}")
                now = time.perf_counter()
                if now - last_probe >= PROBE_EVERY_S:
                    probe = evaluate(encoder, self.val_set, PROBE_IMAGES)
                    self._record("probe", epoch + (batch + 1) / self.steps_per_epoch, probe, epoch_loss / epoch_batches)
                    last_probe = time.perf_counter()
                if now - last_save >= settings.checkpoint_s:
                    self.save()
                    last_save = time.perf_counter()
                if self.step == stop_at_step:
                    progress.close()
                    self.save()
                    return self.history
            progress.close()
            self._record("epoch", epoch + 1, evaluate(encoder, self.val_set), epoch_loss / max(epoch_batches, 1))
            self.save()
            last_save = last_probe = time.perf_counter()  # the epoch's validation stands for a probe
        return self.history

    def _record(self, kind: str, epoch: float, metrics: dict, train_loss: float) -> None:
        entry = {"kind": kind, "epoch": round(epoch, 3), "step": self.step,
                 "images_seen": self.step * self.settings.batch_size, "train_seconds": round(self.train_seconds, 1),
                 "train_images_per_s": round(self.step * self.settings.batch_size / max(self.train_seconds, 1e-9), 2),
                 "train_loss": round(train_loss, 4), "val": metrics}
        self.history.append(entry)
        tqdm.write(f"{kind} {entry['epoch']}: " + json.dumps(entry))


@torch.no_grad()
def trunk_maps(trunk: torch.nn.Module, images: ImageSet, description: str) -> torch.Tensor:
    """layer4 maps (N, 512, h, w) float16 of every image, trunk in eval mode."""
    trunk.eval()
    maps = []
    for start in tqdm(range(0, len(images), EVAL_BATCH), desc=description, unit="batch", mininterval=10.0):
        maps.append(trunk(images_to_tensor(images.images[start:start + EVAL_BATCH]))["feature_map"].half())
    return torch.cat(maps)


def baseline(train_set: ImageSet, val_set: ImageSet, steps: int, settings: TrainSettings,
             image_size: tuple[int, int]) -> dict:
    """The heads trained `steps` steps on a frozen, randomly initialised trunk (see the module's docstring);
    returns its validation metrics and what it took."""
    torch.manual_seed(settings.seed)
    trunk = act_trunk()
    started = time.perf_counter()
    train_maps = trunk_maps(trunk, train_set, "baseline: random trunk, train maps")  # (N, 512, 3, 4)
    val_maps = trunk_maps(trunk, val_set, "baseline: random trunk, val maps")
    mean = train_maps.float().mean(dim=(0, 2, 3), keepdim=True)
    std = train_maps.float().std(dim=(0, 2, 3), keepdim=True).clamp(min=1e-6)
    map_size = tuple(train_maps.shape[2:])
    heads = Heads(map_size)
    optimizer = torch.optim.AdamW(heads.parameters(), lr=1e-3, weight_decay=settings.weight_decay)
    rng = np.random.default_rng([settings.seed, 99])
    for step in tqdm(range(steps), desc="baseline: heads", unit="step", mininterval=10.0):
        index = rng.choice(len(train_set), settings.batch_size, replace=False)
        for group in optimizer.param_groups:
            group["lr"] = 1e-3 * lr_share(step, steps, settings.warmup_steps)
        terms = losses(heads((train_maps[index].float() - mean) / std),
                       batch_targets(train_set, index, image_size, map_size))
        optimizer.zero_grad(set_to_none=True)
        terms["total"].backward()
        optimizer.step()
    heads.eval()
    metrics, loss_sum = Metrics(), 0.0
    with torch.no_grad():
        for start in range(0, len(val_set), EVAL_BATCH):
            index = np.arange(start, min(start + EVAL_BATCH, len(val_set)))
            outputs = heads((val_maps[index].float() - mean) / std)
            target = batch_targets(val_set, index, image_size, map_size)
            loss_sum += float(losses(outputs, target)["total"]) * len(index)
            metrics.update(outputs, target, val_set.camera[index])
    return {"what": "the same heads on a frozen randomly initialised ACT backbone (identity FrozenBatchNorm2d), "
                    "layer4 maps standardised per channel",
            "steps": steps, "batch_size": settings.batch_size, "train_images": len(train_set),
            "seconds": round(time.perf_counter() - started, 1),
            "val": {"loss": round(loss_sum / len(val_set), 4), **metrics.result()}}
