"""`act-sim train`: a thin front to LeRobot's own training (lerobot-train), with an ACT configuration
sized for this task and for 2-core CPU machines. Everything here becomes lerobot-train arguments; any
extra `--key=value` is passed through and wins. A run writes a checkpoint every `save_freq` steps and
`--resume` continues the newest one (lerobot-train --resume=true --config_path=...).

Several GPUs (`num_processes` > 1): the same lerobot-train under `accelerate launch`, one process a GPU, as
LeRobot documents it (docs "Multi-GPU Training"). lerobot-train prepares its model, optimizer and data loader
with accelerate: every process takes its own `batch_size` samples a step, so a step sees num_processes x
batch_size samples and `steps` counts optimizer steps, not samples. On `device` cpu the processes are CPU
processes over torch.distributed's gloo backend: what the tests run on a machine with no GPU.

The recipe (models/act_pick/README.md measures it):
- the target enters as environment_state: the selector's (x, y) and the request one-hot over the eight
  kinds (act_node.observation); ACT takes no language, and the grasp's height and opening depend on the kind.
- VAE off (use_vae false): the scripted expert is deterministic, there is no style to encode, and the
  VAE's 4-layer encoder over the 100-step chunk is a third of a CPU step at small images.
- 2 encoder layers / 1 decoder layer, dim_model 256, dim_feedforward 1024, 8 heads: half LeRobot's width.
- images 96x128 per camera (front + wrist), recorded at that size: ResNet-18 leaves 3x4 tokens a camera.
- chunk_size 100 (the project's chunk), n_action_steps 30: re-plan once a second at 30 fps.
- pretrained_backbone_weights None: nothing downloads; the backbone trains from scratch at the
  transformer's rate (1e-4) instead of LeRobot's 1e-5 for a pretrained ResNet.
- batch 8, dropout 0.1, weight decay 1e-4: LeRobot's ACT defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from act_node.checkpoints import dataset_renderer, recorded_renderer, training_dataset_root, write_renderer
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
    "policy.n_encoder_layers": "2",
    "policy.n_decoder_layers": "1",
    "policy.use_vae": "false",
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
                    extra: list[str], save_freq: int | None = None) -> list[str]:
    arguments = dict(ACT_ARGUMENTS)
    arguments.update({"dataset.repo_id": repo_id, "dataset.root": str(dataset_root), "output_dir": str(output_dir),
                      "steps": str(steps), "save_freq": str(save_freq or steps),
                      "log_freq": str(max(1, min(100, steps // 10))), "policy.device": device, "num_workers": "2"})
    return [f"--{key}={value}" for key, value in _with_extra(arguments, extra).items()]


def _with_extra(arguments: dict[str, str], extra: list[str]) -> dict[str, str]:
    arguments = dict(arguments)
    for item in extra:
        key, sep, value = item.removeprefix("--").partition("=")
        if not sep or not key:
            raise ValueError(f"extra lerobot-train arguments are --key=value, got {item!r}")
        arguments[key] = value
    return arguments


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest checkpoint's folder of a run (output_dir/checkpoints/last), or None."""
    last = Path(output_dir) / "checkpoints" / "last"
    return last if (last / "pretrained_model" / "train_config.json").is_file() else None


def launcher(num_processes: int, device: str, port: int | None = None) -> list[str]:
    """The command that starts lerobot-train: this Python, or `accelerate launch` with `num_processes` processes
    on this machine, everything set on the command line so that no `accelerate config` file of the user's
    changes it. `--multi_gpu` is accelerate's torchrun path whatever the device: with policy.device cpu,
    lerobot-train builds its Accelerator with cpu=True, which under torchrun is accelerate's MULTI_CPU over gloo
    (accelerate's own `--cpu` would start one process, or need mpirun)."""
    if num_processes < 1:
        raise ValueError(f"--num-processes must be 1 or more, got {num_processes}")
    if num_processes == 1:
        return [sys.executable, "-m", "lerobot.scripts.lerobot_train"]
    if device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < num_processes:
            raise ValueError(f"--num-processes {num_processes} on {device}: this machine has "
                             f"{torch.cuda.device_count()} GPUs")
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", f"--num_processes={num_processes}",
            "--num_machines=1", "--mixed_precision=no", "--dynamo_backend=no",
            f"--main_process_port={port or 29500}", "-m", "lerobot.scripts.lerobot_train"]


def train(dataset_root: Path, repo_id: str, output_dir: Path, steps: int, device: str, extra: list[str],
          save_freq: int | None = None, resume: bool = False, num_processes: int = 1,
          port: int | None = None) -> Path:
    """Run lerobot-train; return the final checkpoint's pretrained_model folder. With `resume`, continue the
    newest checkpoint in `output_dir` up to `steps` (its configuration stands; `extra` may still override).
    `num_processes` > 1: under `accelerate launch` (see `launcher`), on the port `port` (default 29500)."""
    start = launcher(num_processes, device, port)
    if resume:
        last = last_checkpoint(output_dir)
        if last is None:
            raise FileNotFoundError(f"nothing to resume in {output_dir}: no checkpoints/last/pretrained_model/"
                                    "train_config.json")
        # output_dir: the run's folder as it is now (the checkpoint's config names where it was first written)
        arguments = _with_extra({"resume": "true", "config_path": str(last / "pretrained_model" / "train_config.json"),
                                 "output_dir": str(output_dir), "steps": str(steps)}, extra)
        if save_freq:
            arguments["save_freq"] = str(save_freq)
        command_arguments = [f"--{key}={value}" for key, value in arguments.items()]
    else:
        if not (Path(dataset_root) / "meta" / "info.json").is_file():
            raise FileNotFoundError(f"no LeRobotDataset at {dataset_root} (meta/info.json missing): record one first")
        if Path(output_dir).exists():
            raise FileExistsError(f"{output_dir} exists: lerobot-train refuses to overwrite it; choose another, "
                                  "or --resume to continue its newest checkpoint")
        command_arguments = train_arguments(dataset_root, repo_id, output_dir, steps, device, extra, save_freq)
    command = [*start, *command_arguments]
    print("running:", " ".join(command), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                             "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"})
    stamp_renderer(Path(output_dir))
    return Path(output_dir) / "checkpoints" / "last" / "pretrained_model"


def stamp_renderer(output_dir: Path) -> None:
    """Copy the training dataset's renderer (act_node.checkpoints.RENDERER_FILE) into every checkpoint of a run that
    lacks it, so that a checkpoint copied away from its dataset is still evaluated with the renderer its images
    came from (none when the dataset is not on this machine)."""
    for model in sorted(Path(output_dir).glob("checkpoints/*/pretrained_model")):
        if recorded_renderer(model) is not None:
            continue
        root = training_dataset_root(model)
        renderer = dataset_renderer(root) if root else None
        if renderer is not None:
            write_renderer(model, renderer)
