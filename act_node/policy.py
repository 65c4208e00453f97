"""A LeRobot checkpoint as a callable: one observation in, the whole action chunk out.

    policy = ChunkPolicy.load("outputs/train/act_pick/checkpoints/last/pretrained_model", device="cpu")
    chunk, seconds = policy(observation)        # chunk: (chunk_size, action_dim), dataset units

`observation` is the env's own dict (`pixels` {camera: HWC uint8}, `agent_pos`, `environment_state`) or
LeRobot's flat batch keys (`observation.state`, `observation.images.<camera>` ...). The checkpoint's
input features are checked against what it is fed before anything runs: every mismatch is listed.
Nothing downloads: the folder must hold config.json, model.safetensors and the processors' files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.envs.utils import preprocess_observation
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

from act_node import so101
from act_node.checkpoints import check_checkpoint_folder, read_json
from act_node.observation import ENV_LAYOUTS, environment_layout, environment_state_names

__all__ = ["ACTION", "OBS_ENV_STATE", "OBS_IMAGES", "OBS_STATE", "CheckpointMismatch", "ChunkPolicy", "FeatureSpec",
           "check_features", "to_batch"]

REQUIRED_FILES = ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json")


class CheckpointMismatch(ValueError):
    """The checkpoint does not fit what it would be fed; the message lists every mismatch."""


@dataclass(frozen=True)
class FeatureSpec:
    """What a policy is fed: camera images (H, W) by name, the state size, the env-state size (or None: not
    fed), where a tuple is the sizes the feeder can build: by default each layout of act_node.observation, since
    the env, the recorder and the policy node build the one the checkpoint takes."""

    cameras: dict[str, tuple[int, int]]
    state_dim: int = len(so101.JOINT_NAMES)
    env_state_dim: int | tuple[int, ...] | None = tuple(len(environment_state_names(layout)) for layout in ENV_LAYOUTS)
    action_dim: int = len(so101.JOINT_NAMES)


def check_features(config: Any, spec: FeatureSpec) -> list[str]:
    """Every way the policy config's input/output features differ from `spec`, as sentences."""
    problems = []
    inputs = dict(config.input_features)
    expected_images = {f"{OBS_IMAGES}.{name}": size for name, size in spec.cameras.items()}
    for key, feature in inputs.items():
        if key.startswith(OBS_IMAGES + "."):
            if key not in expected_images:
                problems.append(f"the checkpoint wants camera {key!r}, which is not fed "
                                f"(fed: {sorted(expected_images) or 'none'})")
                continue
            channels, height, width = feature.shape
            if (height, width) != expected_images[key] or channels != 3:
                problems.append(f"{key}: the checkpoint wants images {tuple(feature.shape)} (C, H, W), "
                                f"fed (3, {expected_images[key][0]}, {expected_images[key][1]})")
        elif key == OBS_STATE:
            if tuple(feature.shape) != (spec.state_dim,):
                problems.append(f"{OBS_STATE}: the checkpoint wants shape {tuple(feature.shape)}, "
                                f"fed ({spec.state_dim},) ({', '.join(so101.JOINT_NAMES)})")
        elif key == OBS_ENV_STATE:
            if spec.env_state_dim is None:
                problems.append(f"the checkpoint wants {OBS_ENV_STATE} {tuple(feature.shape)}, which is not fed")
            else:
                sizes = spec.env_state_dim if isinstance(spec.env_state_dim, tuple) else (spec.env_state_dim,)
                if len(feature.shape) != 1 or feature.shape[0] not in sizes:
                    fed = " or ".join(f"({size},)" for size in sizes)
                    layouts = ", ".join(f"{len(environment_state_names(layout))} {layout}" for layout in ENV_LAYOUTS)
                    problems.append(f"{OBS_ENV_STATE}: the checkpoint wants shape {tuple(feature.shape)}, fed {fed} "
                                    f"(act_node's layouts: {layouts})")
        else:
            problems.append(f"the checkpoint wants input {key!r}, which this system does not provide")
    for key in expected_images:
        if key not in inputs:
            problems.append(f"camera {key!r} is fed but the checkpoint has no such input")
    action = dict(config.output_features).get(ACTION)
    if action is None:
        problems.append("the checkpoint has no 'action' output")
    elif tuple(action.shape) != (spec.action_dim,):
        problems.append(f"action: the checkpoint outputs shape {tuple(action.shape)}, the arm takes "
                        f"({spec.action_dim},) ({', '.join(so101.JOINT_NAMES)})")
    return problems


def resized_frame(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(H, W, 3) uint8 -> (size[0], size[1], 3) uint8: a camera frame at the size a checkpoint (or the yaw reader)
    was trained on, resized as LeRobot's ImageCropResizeProcessorStep resizes (torchvision's bilinear resize with
    antialiasing on [0, 1] floats, clamped), then rounded back to uint8. A frame of that size already is returned
    as it is (in-process evaluation renders at the checkpoint's size: nothing changes there)."""
    image = np.asarray(image)
    if image.shape[:2] == tuple(size):
        return image
    from lerobot.processor.hil_processor import ImageCropResizeProcessorStep

    key = f"{OBS_IMAGES}.frame"
    tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float() / 255.0  # (1, 3, H, W)
    out = ImageCropResizeProcessorStep(resize_size=tuple(size)).observation({key: tensor})[key]
    return (out[0].permute(1, 2, 0) * 255.0).round().to(torch.uint8).numpy()  # (h, w, 3)


def to_batch(observation: dict, task: str = "") -> dict[str, Any]:
    """The env's observation (or LeRobot's flat keys) -> a batch of one in LeRobot's keys, images in
    (1, 3, H, W) float [0, 1]. The env's dict goes through LeRobot's own `preprocess_observation`, after
    checks that name what is wrong (LeRobot's are bare asserts)."""
    if "pixels" in observation or "agent_pos" in observation:
        env_observation = {"pixels": {}}
        for name, image in observation.get("pixels", {}).items():
            image = np.asarray(image)
            if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
                raise ValueError(f"{OBS_IMAGES}.{name}: expected an (H, W, 3) uint8 image, got {image.shape} "
                                 f"{image.dtype}")
            env_observation["pixels"][name] = np.ascontiguousarray(image)
        for key in ("agent_pos", "environment_state"):
            if key in observation:
                env_observation[key] = _finite(key, observation[key])
        batch = preprocess_observation(env_observation)
    else:
        batch = {}
        for key, value in observation.items():
            if key == "task":
                continue
            tensor = torch.as_tensor(np.asarray(value))
            if key.startswith(OBS_IMAGES + "."):
                if tensor.ndim != 3 or tensor.shape[-1] != 3 or tensor.dtype != torch.uint8:
                    raise ValueError(f"{key}: expected an (H, W, 3) uint8 image, got {tuple(tensor.shape)} "
                                     f"{tensor.dtype}")
                tensor = tensor.permute(2, 0, 1).float().div(255.0)
            else:
                tensor = torch.as_tensor(_finite(key, value))
            batch[key] = tensor.unsqueeze(0)
    return {**batch, "task": [task]}


def _finite(key: str, value) -> np.ndarray:
    array = np.asarray(value, dtype=np.float32)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{key} holds NaN or inf: {array.tolist()}")
    return array


def policy_config(path: str | Path):
    """The checkpoint's LeRobot policy config (an ACTConfig ...), from its config.json as act_node.checkpoints
    read it: the file is parsed once, whoever asks (PreTrainedConfig.from_pretrained would parse it again).
    ValueError naming the file when its type is unknown or its content does not fit that type."""
    import draccus
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies import factory  # noqa: F401 (registers LeRobot's policy types)

    config_file = Path(path) / "config.json"
    content = dict(read_json(config_file))
    kind = content.pop("type", None)
    try:
        config_class = PreTrainedConfig.get_choice_class(kind)
    except KeyError:
        raise ValueError(f"{config_file}: policy type {kind!r} is not one of LeRobot's "
                         f"{sorted(PreTrainedConfig.get_known_choices())}") from None
    try:
        with draccus.config_type("json"):
            return draccus.decode(config_class, content)
    except Exception as error:  # draccus raises its own DecodingError, and TypeError/ValueError from fields
        raise ValueError(f"{config_file} does not read as a {config_class.__name__}: {error}") from None


class ChunkPolicy:
    """A loaded LeRobot policy with its processors; `__call__` answers one observation with a chunk."""

    def __init__(self, policy, preprocessor, postprocessor, path: Path):
        self.policy = policy
        self.preprocessor = preprocessor
        self.postprocessor = postprocessor
        self.path = path
        self.config = policy.config

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu", expect: FeatureSpec | None = None,
             rename_map: dict[str, str] | None = None) -> ChunkPolicy:
        """Load a `pretrained_model` folder on `device`; with `expect`, refuse (CheckpointMismatch) a
        checkpoint whose features differ. `rename_map` {the fed key: the checkpoint's key} goes to the
        preprocessor's rename step, as lerobot-eval's --rename_map does (`expect` names the checkpoint's keys)."""
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        path = Path(path)
        try:  # a missing folder, or a run folder given for its pretrained_model: named, with the folder expected
            check_checkpoint_folder(path, argument="checkpoint ")
        except ValueError as error:
            raise FileNotFoundError(str(error)) from None
        missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{path} is not a LeRobot pretrained_model folder: missing {', '.join(missing)}")
        config = policy_config(path)
        if expect is not None:
            problems = check_features(config, expect)
            if problems:
                listed = "\n  - ".join(problems)
                raise CheckpointMismatch(f"checkpoint {path} does not match its inputs:\n  - {listed}")
        config.device = device
        if getattr(config, "pretrained_backbone_weights", None):
            config.pretrained_backbone_weights = None  # the weights come from model.safetensors: nothing downloads
        policy = get_policy_class(config.type).from_pretrained(str(path), config=config)
        policy.to(device).eval()
        overrides = {"device_processor": {"device": device}}
        if rename_map:
            overrides["rename_observations_processor"] = {"rename_map": dict(rename_map)}
        preprocessor, postprocessor = make_pre_post_processors(
            config, pretrained_path=str(path), preprocessor_overrides=overrides,
            postprocessor_overrides={"device_processor": {"device": "cpu"}})
        return cls(policy, preprocessor, postprocessor, path)

    @property
    def chunk_size(self) -> int:
        return int(self.config.chunk_size)

    @property
    def environment_layout(self) -> str | None:
        """The environment_state layout the checkpoint takes (act_node.observation.ENV_LAYOUTS), from its size;
        None when it takes no environment_state. ValueError when the size is none of the layouts."""
        feature = dict(self.config.input_features).get(OBS_ENV_STATE)
        return None if feature is None else environment_layout(int(feature.shape[0]))

    @property
    def camera_names(self) -> list[str]:
        return [key.removeprefix(OBS_IMAGES + ".") for key in self.config.input_features
                if key.startswith(OBS_IMAGES + ".")]

    def reset(self) -> None:
        self.policy.reset()

    @torch.no_grad()
    def __call__(self, observation: dict, task: str = "") -> tuple[np.ndarray, float]:
        """(chunk (chunk_size, action_dim) float32 in the dataset's units, seconds it took)."""
        started = time.perf_counter()
        batch = self.preprocessor(to_batch(observation, task))
        chunk = self.policy.predict_action_chunk(batch)  # (1, chunk_size, action_dim), normalized
        chunk = self.postprocessor(chunk)
        return chunk[0].detach().cpu().numpy().astype(np.float32), time.perf_counter() - started

    @torch.no_grad()
    def chunks(self, observations: list[dict], tasks: list[str]) -> tuple[np.ndarray, float]:
        """Many observations answered in one batched call: (chunks (rows, chunk_size, action_dim) float32 in the
        dataset's units, seconds the call took). Each observation goes through to_batch as __call__'s does, the
        rows are stacked, and the preprocessor, the model and the postprocessor run once on the stack."""
        started = time.perf_counter()
        rows = [to_batch(observation, task) for observation, task in zip(observations, tasks, strict=True)]
        for index, row in enumerate(rows):
            if row.keys() != rows[0].keys():
                raise ValueError(f"observation {index} has keys {sorted(row)}, observation 0 {sorted(rows[0])}: a "
                                 "batch's observations must hold the same features")
        batch = {key: torch.cat([row[key] for row in rows]) for key in rows[0] if key != "task"}
        batch["task"] = list(tasks)
        chunk = self.postprocessor(self.policy.predict_action_chunk(self.preprocessor(batch)))  # (rows, chunk, 6)
        return chunk.detach().cpu().numpy().astype(np.float32), time.perf_counter() - started
