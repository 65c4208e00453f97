"""Parameters declared with descriptors: what each is, its range or allowed values, and whether it can change
while the node runs. `ros2 param describe` shows them. A set of a read-only one is refused by rclpy
("Trying to set a read-only parameter"); a set of a changeable one goes through the node's own check
(`refuse`) before it takes effect, and a value out of range is refused by rclpy with the range.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node

FIXED = " Read-only: fixed at start (relaunch to change)."
CHANGEABLE = " Changeable at run time (ros2 param set)."


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
