"""Parameters declared one way, with descriptors: what each is, its range or allowed values, and whether it can
change while the node runs. `ros2 param describe` shows them.

Each node lists its parameters once, as `Spec`s (the arm's, the camera's, the policy's ...), or takes them from
GraphConfig, the one source of the graph's launch arguments (`from_config`: the same default, description and
limits); `declare_all` declares a list and returns the values. A set of a read-only one is refused by rclpy
("Trying to set a read-only parameter"); a set of a changeable one goes through the node's own check
(`refuse`) before it takes effect, and a value out of range is refused by rclpy with the range.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node

from act_node.config import GraphConfig

FIXED = " Read-only: fixed at start (relaunch to change)."
CHANGEABLE = " Changeable at run time (ros2 param set)."


@dataclass(frozen=True)
class Spec:
    """One parameter: its name, default (its type too), what it is, and its range or allowed values."""

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    changeable: bool = False


def from_config(name: str, changeable: bool = False) -> Spec:
    """GraphConfig's field `name` as a parameter: its default, description and limits (a tuple as a list)."""
    fields = {spec.name: spec for spec in dataclasses.fields(GraphConfig)}
    if name not in fields or "description" not in fields[name].metadata:
        raise KeyError(f"GraphConfig has no launch argument {name!r}")
    meta, default = fields[name].metadata, fields[name].default
    return Spec(name, list(default) if isinstance(default, tuple) else default, meta["description"],
                meta.get("low"), meta.get("high"), meta.get("choices"), changeable)


def declare_all(node: Node, specs: Sequence[Spec]) -> dict[str, Any]:
    """Declare every spec on `node`; {name: value} (a launch override or the default)."""
    return {spec.name: declare(node, spec.name, spec.default, spec.description, changeable=spec.changeable,
                               low=spec.low, high=spec.high, choices=spec.choices) for spec in specs}


def declare(node: Node, name: str, default, description: str, *, changeable: bool = False, low=None, high=None,
            choices: Sequence[str] | None = None):
    """Declare `name` with a descriptor and return its value (a launch override or `default`); a value
    outside `choices` is a ValueError naming it (rclpy itself refuses one outside [low, high])."""
    text = description + (f" One of: {', '.join(choices)}." if choices else "") + (CHANGEABLE if changeable else FIXED)
    descriptor = ParameterDescriptor(name=name, description=text, read_only=not changeable)
    if choices:
        descriptor.additional_constraints = f"one of {', '.join(choices)}"
    if low is not None or high is not None:
        if isinstance(default, float):
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(-sys.float_info.max if low is None else low),
                to_value=float(sys.float_info.max if high is None else high), step=0.0)]
        elif isinstance(default, int) and not isinstance(default, bool):
            descriptor.integer_range = [IntegerRange(from_value=int(-(2**63) if low is None else low),
                                                     to_value=int(2**63 - 1 if high is None else high), step=1)]
    value = node.declare_parameter(name, default, descriptor).value
    problem = refuse(name, value, choices)
    if problem:
        raise ValueError(problem)
    return value


def refuse(name: str, value, choices: Sequence[str] | None) -> str | None:
    """Why `value` cannot be `name`'s, or None."""
    if choices and value not in choices:
        return f"parameter {name} must be one of {', '.join(choices)}, got {value!r}"
    return None


def result(problems: list[str]) -> SetParametersResult:
    """An on-set callback's answer: refused with every reason, or accepted."""
    return SetParametersResult(successful=not problems, reason="; ".join(problems))
