"""ACT's backbone from a file: the pretrained trunk as LeRobot ACT's `model.backbone.*` tensors, loaded and run.

A backbone file (safetensors, `model.backbone.*` keys; backbone.json beside it says what it was trained on) is what
act_lab.vision.export writes from the encoder it trains (models/tabletop_encoder). Its keys are checked against a real
ACTPolicy's state dict, so the file loads into any ACT with image features:

    policy = ACTPolicy(config)                                                 # lerobot's own
    load_backbone(policy, Path("backbone.safetensors"))                        # strict: every key, every shape
    trunk = act_backbone(Path("backbone.safetensors"))                         # the backbone alone, for a reader

A checkpoint made so is a plain LeRobot ACT checkpoint (ACTPolicy.from_pretrained loads it unchanged). Its
preprocessor must feed the images as the encoder saw them: float in [0, 1], VISUAL normalization IDENTITY.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

ACT_BACKBONE_PREFIX = "model.backbone."


def one_camera_act(dilation: bool = False, image_size: tuple[int, int] = (96, 128)) -> nn.Module:
    """A real ACTPolicy with one camera, as lerobot builds it (no pretrained weights): its backbone is ACT's."""
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    config = ACTConfig(input_features={"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                                       "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, *image_size))},
                       output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))},
                       pretrained_backbone_weights=None, replace_final_stride_with_dilation=dilation, device="cpu")
    return ACTPolicy(config)


def act_backbone_shapes(dilation: bool = False, image_size: tuple[int, int] = (96, 128)) -> dict[str, tuple]:
    """{key: shape} of `model.backbone.*` in a real ACTPolicy with one camera (lerobot builds it here)."""
    return {key: tuple(value.shape) for key, value in one_camera_act(dilation, image_size).state_dict().items()
            if key.startswith(ACT_BACKBONE_PREFIX)}


def check_against_act(state: dict[str, torch.Tensor], expected: dict[str, tuple]) -> None:
    """ValueError naming the keys missing, extra, or of another shape than ACT's."""
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    shapes = [f"{key} {tuple(state[key].shape)} (ACT: {expected[key]})" for key in sorted(set(state) & set(expected))
              if tuple(state[key].shape) != expected[key]]
    if missing or extra or shapes:
        raise ValueError(f"backbone does not match ACT's: missing {missing[:5]} ({len(missing)}), extra {extra[:5]} "
                         f"({len(extra)}), other shapes {shapes[:5]}")


def load_backbone(policy: nn.Module, path: Path) -> None:
    """Put the backbone at `path` into an ACTPolicy (in place): every `model.backbone.*` key, nothing else.
    ValueError when the file's keys or shapes are not the policy's, or its dilation is not the policy's."""
    state = load_file(str(path))
    config = getattr(policy, "config", None)
    description = Path(path).with_suffix(".json")
    if config is not None and description.is_file():
        dilation = bool(json.loads(description.read_text()).get("replace_final_stride_with_dilation", False))
        if dilation != bool(config.replace_final_stride_with_dilation):
            raise ValueError(f"{path} was trained with replace_final_stride_with_dilation={dilation}, the policy has "
                             f"{bool(config.replace_final_stride_with_dilation)}")
    backbone = policy.model.backbone
    check_against_act(state, {ACT_BACKBONE_PREFIX + key: tuple(value.shape)
                              for key, value in backbone.state_dict().items()})
    backbone.load_state_dict({key.removeprefix(ACT_BACKBONE_PREFIX): value for key, value in state.items()},
                             strict=True)


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> float32 (N, 3, H, W) in [0, 1], as LeRobot's dataset hands images to a policy."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).to(torch.float32).div_(255.0)


def act_backbone(backbone_path: Path) -> torch.nn.Module:
    """ACT's backbone (lerobot's own construction: resnet18 layer4, FrozenBatchNorm2d) holding the weights at
    `backbone_path` (this module's format)."""
    dilation = False
    description = Path(backbone_path).with_suffix(".json")
    if description.is_file():
        dilation = bool(json.loads(description.read_text()).get("replace_final_stride_with_dilation", False))
    policy = one_camera_act(dilation)
    load_backbone(policy, backbone_path)
    return policy.model.backbone.eval()
