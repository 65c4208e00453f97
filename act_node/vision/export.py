"""The pretrained trunk as LeRobot ACT's backbone: a safetensors file of `model.backbone.*` tensors, and its loader.

The trunk trains with BatchNorm2d; ACT's backbone has FrozenBatchNorm2d. A BatchNorm2d in eval mode computes
(x - running_mean) / sqrt(running_var + eps) * weight + bias, which is what FrozenBatchNorm2d computes from its
four buffers of the same names (eps 1e-5 in both): the fold copies those four and drops num_batches_tracked.
The keys are checked against a real ACTPolicy's state dict, so the file loads into any ACT with image features:

    write_backbone(encoder.trunk, Path("backbone.safetensors"), about={...})  # + backbone.json beside it
    policy = ACTPolicy(config)                                                 # lerobot's own
    load_backbone(policy, Path("backbone.safetensors"))                        # strict: every key, every shape

A checkpoint made so is a plain LeRobot ACT checkpoint (ACTPolicy.from_pretrained loads it unchanged). Its
preprocessor must feed the images as the encoder saw them: float in [0, 1], VISUAL normalization IDENTITY.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

ACT_BACKBONE_PREFIX = "model.backbone."
DROPPED_BUFFERS = ("num_batches_tracked",)  # BatchNorm2d keeps it, FrozenBatchNorm2d has none


def folded_state_dict(trunk: nn.Module) -> dict[str, torch.Tensor]:
    """The trunk's tensors under ACT's keys ("model.backbone.layer1.0.bn1.running_var", ...), float32."""
    state = {}
    for name, tensor in trunk.state_dict().items():
        if name.rsplit(".", 1)[-1] in DROPPED_BUFFERS:
            continue
        state[ACT_BACKBONE_PREFIX + name] = tensor.detach().to(torch.float32).contiguous().clone()
    return state


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


def write_backbone(trunk: nn.Module, path: Path, about: dict, dilation: bool = False) -> dict[str, torch.Tensor]:
    """Write the folded trunk to `path` (safetensors) and `about` (what it was trained on) to path.json beside it;
    both atomically. Returns the tensors written."""
    state = folded_state_dict(trunk)
    check_against_act(state, act_backbone_shapes(dilation))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = {"format": "LeRobot ACT backbone (torchvision resnet18 layer4, FrozenBatchNorm2d buffers)",
            "key_prefix": ACT_BACKBONE_PREFIX, "replace_final_stride_with_dilation": dilation,
            "input": "float32 RGB in [0, 1], (3, H, W): VISUAL normalization IDENTITY", **about}
    partial = path.with_name(path.name + ".partial")
    save_file(state, str(partial), metadata={"format": "pt", "act_node": json.dumps({"key_prefix": ACT_BACKBONE_PREFIX,
                                                                                     "dilation": dilation})})
    os.replace(partial, path)
    description = path.with_suffix(".json")
    partial = description.with_name(description.name + ".partial")
    partial.write_text(json.dumps(note, indent=1) + "\n")
    os.replace(partial, description)
    return state


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
