"""The pretrained trunk as LeRobot ACT's backbone: a safetensors file of `model.backbone.*` tensors.

The trunk trains with BatchNorm2d; ACT's backbone has FrozenBatchNorm2d. A BatchNorm2d in eval mode computes
(x - running_mean) / sqrt(running_var + eps) * weight + bias, which is what FrozenBatchNorm2d computes from its
four buffers of the same names (eps 1e-5 in both): the fold copies those four and drops num_batches_tracked.
The keys are checked against a real ACTPolicy's state dict; act_node.perception.backbone loads the file:

    write_backbone(encoder.trunk, Path("backbone.safetensors"), about={...})  # + backbone.json beside it
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from act_node.perception.backbone import ACT_BACKBONE_PREFIX, act_backbone_shapes, check_against_act

DROPPED_BUFFERS = ("num_batches_tracked",)  # BatchNorm2d keeps it, FrozenBatchNorm2d has none


def folded_state_dict(trunk: nn.Module) -> dict[str, torch.Tensor]:
    """The trunk's tensors under ACT's keys ("model.backbone.layer1.0.bn1.running_var", ...), float32."""
    state = {}
    for name, tensor in trunk.state_dict().items():
        if name.rsplit(".", 1)[-1] in DROPPED_BUFFERS:
            continue
        state[ACT_BACKBONE_PREFIX + name] = tensor.detach().to(torch.float32).contiguous().clone()
    return state


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
