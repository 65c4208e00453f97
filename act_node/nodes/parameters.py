"""Parameters declared one way, from the one table (act_node.settings), with descriptors: what each is, its range or
allowed values, and whether it can change while the node runs. `ros2 param describe` shows them.

`declare_node(node, name)` declares every parameter act_node.settings.NODES lists for that node, with the table's
default, description and limits (or the node's override there, which says why) and returns the values. A set of a
read-only one is refused by rclpy ("Trying to set a read-only parameter"); a set of a changeable one goes through
the node's own check (`refuse`) before it takes effect, and a value out of range is refused by rclpy with the range.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node

from act_node.settings import CHANGEABLE as CHANGEABLE_PARAMETERS
from act_node.settings import COMPUTED, OVERRIDES, node_parameters

FIXED = " Read-only: fixed at start (relaunch to change)."
CHANGEABLE = " Changeable at run time (ros2 param set)."


def declare_node(node: Node, name: str, computed=None) -> dict:
    """Declare every parameter of the node `name` (act_node.settings.NODES) on `node`; {parameter: value} (a launch
    override or the default). `computed(values) -> {parameter: default}`: the defaults the node works out at start
    from the others' values (called once), where the table's override says COMPUTED; those are declared last."""
    entries = node_parameters(name)
    values, given = {}, None
    for entry in sorted(entries, key=lambda entry: entry.default is COMPUTED):  # stable: the table's order else
        default = entry.default
        if default is COMPUTED:
            given = given if given is not None else (computed(values) if computed is not None else {})
            if entry.name not in given:
                raise KeyError(f"{name}'s parameter {entry.name} has a computed default "
                               f"({OVERRIDES[(name, entry.name)].reason}): declare_node needs it from `computed`")
            default = given[entry.name]
        values[entry.name] = declare(node, entry.name, list(default) if isinstance(default, tuple) else default,
                                     entry.description, changeable=entry.name in CHANGEABLE_PARAMETERS.get(name, ()),
                                     low=entry.low, high=entry.high, choices=entry.choices)
    return {entry.name: values[entry.name] for entry in entries}


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
