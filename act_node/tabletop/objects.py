"""The eight kinds of object, shaped and sized like the thing and small enough for the SO-101's jaws.

Each kind is a list of primitive parts in the object's own frame (origin on the table under its centre,
x along its long axis), a mass, a colour, and how the jaws take it: the height of the grasp above the
table and the width across the jaws. The jaws close across the object's y axis (its narrow side).
"""

from __future__ import annotations

from dataclasses import dataclass

from act_node.table_frame import KIND_NAMES


@dataclass(frozen=True)
class Part:
    shape: str  # "box" (half extents), "sphere" (radius), "cylinder" (radius, length along z)
    size: tuple[float, ...]
    offset: tuple[float, float, float]  # centre of the part in the object frame, metres
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class ObjectKind:
    name: str
    parts: tuple[Part, ...]
    mass_kg: float
    height_m: float  # top of the object above the table
    grasp_height_m: float  # where the jaw pads' centre goes
    width_m: float  # across the jaws
    footprint_m: float  # radius of a circle on the table that holds the object (for placing)
    round_: bool = False  # rolls: gets rolling friction
    grasp_turns: int = 2  # closing directions that take it equally well over a full turn (0: any)


RED, ORANGE, WHITE, BLUE = (0.85, 0.15, 0.15, 1), (1.0, 0.55, 0.1, 1), (0.95, 0.95, 0.92, 1), (0.15, 0.3, 0.85, 1)
BROWN, SILVER, GOLD, GREEN = (0.6, 0.42, 0.25, 1), (0.72, 0.74, 0.78, 1), (0.85, 0.7, 0.2, 1), (0.2, 0.7, 0.3, 1)

KINDS: dict[str, ObjectKind] = {
    "cube": ObjectKind("cube", (Part("box", (0.0175, 0.0175, 0.0175), (0, 0, 0.0175), RED),),
                       0.05, 0.035, 0.0175, 0.035, 0.025, grasp_turns=4),
    "ball": ObjectKind("ball", (Part("sphere", (0.02,), (0, 0, 0.02), ORANGE),),
                       0.04, 0.04, 0.02, 0.04, 0.02, round_=True, grasp_turns=0),
    "cup": ObjectKind("cup", (Part("cylinder", (0.02, 0.065), (0, 0, 0.0325), WHITE),
                              Part("box", (0.004, 0.01, 0.016), (0.024, 0, 0.038), WHITE)),  # the handle
                      0.05, 0.065, 0.052, 0.04, 0.03),
    "pen": ObjectKind("pen", (Part("box", (0.06, 0.007, 0.007), (0, 0, 0.007), BLUE),
                              Part("box", (0.008, 0.0075, 0.0075), (0.052, 0, 0.0075), WHITE)),  # the cap
                      0.015, 0.015, 0.014, 0.014, 0.062),
    "box": ObjectKind("box", (Part("box", (0.03, 0.0175, 0.015), (0, 0, 0.015), BROWN),),
                      0.06, 0.03, 0.015, 0.035, 0.035),
    "can": ObjectKind("can", (Part("cylinder", (0.02, 0.07), (0, 0, 0.035), SILVER),),
                      0.07, 0.07, 0.056, 0.04, 0.022, round_=True, grasp_turns=0),
    "key": ObjectKind("key", (Part("box", (0.022, 0.007, 0.007), (0, 0, 0.007), GOLD),
                              Part("cylinder", (0.013, 0.014), (-0.034, 0, 0.007), GOLD)),  # shank, then bow
                      0.02, 0.014, 0.014, 0.014, 0.047),
    "toy": ObjectKind("toy", (Part("box", (0.015, 0.015, 0.02), (0, 0, 0.02), GREEN),
                              Part("sphere", (0.012,), (0, 0, 0.052), GREEN)),  # body, then head
                      0.04, 0.064, 0.034, 0.03, 0.022),
}

assert tuple(KINDS) == KIND_NAMES, "the object kinds must be act_node.table_frame.KIND_NAMES, in order"


def kind(name: str) -> ObjectKind:
    if name not in KINDS:
        raise ValueError(f"unknown object kind {name!r}; expected one of {list(KINDS)}")
    return KINDS[name]
