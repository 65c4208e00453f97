"""`act-sim train`: a thin front to LeRobot's own training (lerobot-train), with an ACT configuration
sized for this task and for 2-core CPU machines. Everything here becomes lerobot-train arguments; any
extra `--key=value` is passed through and wins.

Why these numbers:
- images 120x160 per camera (front + wrist): the objects are 3-6 cm and still span several pixels;
  ResNet-18 leaves a 4x5 feature map, 20 tokens a camera, so CPU steps stay near a second.
- chunk_size 100 (the project's chunk), n_action_steps 30: re-plan once a second at 30 fps; the
  grasp takes about 4 s, so executing whole 100-step chunks would run most of it open loop.
- dim_model 256, dim_feedforward 1024, 4 encoder / 1 decoder layers, 8 heads (half LeRobot's width):
  the task is one arm and one object, and 512/3200 costs about 3x the time per step here.
- pretrained_backbone_weights None: nothing downloads; the backbone trains from scratch, so its rate
  matches the transformer's (1e-4) instead of LeRobot's 1e-5 for a pretrained ResNet.
- batch 8, VAE on (kl_weight 10), dropout 0.1: LeRobot's ACT defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from act_node.config import CHUNK_SIZE, REPLAN_EVERY

ACT_ARGUMENTS = {
    "policy.type": "act",
    "policy.push_to_hub": "false",
    "policy.pretrained_backbone_weights": "null",
    "policy.chunk_size": str(CHUNK_SIZE),
    "policy.n_action_steps": str(REPLAN_EVERY),
    "policy.dim_model": "256",
    "policy.dim_feedforward": "1024",
    "policy.n_heads": "8",
    "policy.n_encoder_layers": "4",
    "policy.n_decoder_layers": "1",
    "policy.optimizer_lr": "1e-4",
    "policy.optimizer_lr_backbone": "1e-4",
    "batch_size": "8",
    "wandb.enable": "false",
    "save_checkpoint": "true",
}


def act_config(input_features: dict, output_features: dict, **overrides):
    """LeRobot's ACTConfig with this task's numbers (the `policy.*` entries of ACT_ARGUMENTS, as lerobot-train
    reads them), for the features given; `overrides` win (e.g. dim_model=512)."""
    from lerobot.policies.act.configuration_act import ACTConfig

    values = {}
    for key, text in ACT_ARGUMENTS.items():
        name = key.removeprefix("policy.")
        if key.startswith("policy.") and name not in ("type", "push_to_hub"):
            values[name] = _value(text)
    values.update(overrides)
    return ACTConfig(input_features=input_features, output_features=output_features, device="cpu", **values)


def _value(text: str):
    """A lerobot-train argument's text as the value it parses to: null, true/false, int, float, or text."""
    if text in ("null", "true", "false"):
        return {"null": None, "true": True, "false": False}[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def train_arguments(dataset_root: Path, repo_id: str, output_dir: Path, steps: int, device: str,
                    extra: list[str]) -> list[str]:
    arguments = dict(ACT_ARGUMENTS)
    arguments.update({"dataset.repo_id": repo_id, "dataset.root": str(dataset_root), "output_dir": str(output_dir),
                      "steps": str(steps), "save_freq": str(steps), "log_freq": str(max(1, min(100, steps // 10))),
                      "policy.device": device, "num_workers": "2"})
    for item in extra:
        key, _, value = item.removeprefix("--").partition("=")
        arguments[key] = value
    return [f"--{key}={value}" for key, value in arguments.items()]


def train(dataset_root: Path, repo_id: str, output_dir: Path, steps: int, device: str, extra: list[str]) -> Path:
    """Run lerobot-train; return the final checkpoint's pretrained_model folder."""
    if not (Path(dataset_root) / "meta" / "info.json").is_file():
        raise FileNotFoundError(f"no LeRobotDataset at {dataset_root} (meta/info.json missing): record one first")
    if Path(output_dir).exists():
        raise FileExistsError(f"{output_dir} exists: lerobot-train refuses to overwrite it; choose another")
    command = [sys.executable, "-m", "lerobot.scripts.lerobot_train",
               *train_arguments(dataset_root, repo_id, output_dir, steps, device, extra)]
    print("running:", " ".join(command), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                             "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"})
    return Path(output_dir) / "checkpoints" / "last" / "pretrained_model"
