"""The pick planner: closed-form IK over the table-top's geometry, for the scripted expert, the expert node and
the scene sampler (which asks it what it can reach).

Plan (table frame, tool pointing down): swing above the target with the jaws open (joint space), go down to the
grasp height, close, lift 8 cm while drawing the object toward a comfortable reach, hold. It reads the target
(x, y), the joints, and the object's kind, yaw and neighbours: the pen and the key must be taken across their
narrow side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from act_node import so101
from act_node.tabletop import kinematics
from act_node.tabletop.objects import ObjectKind
from act_node.tabletop.objects import kind as object_kind
from act_node.tabletop.world import ARM_BASE_YAW, table_to_arm

APPROACH_ABOVE_M = 0.05
LIFT_M = 0.08
LIFT_PULL_M = 0.04  # lifting also draws the object up to this far toward a comfortable reach: a level tool
COMFORT_REACH_M = 0.19
FIXED_JAW_GAP_M = 0.004  # between the fixed jaw and the object's side on the way down
MOVING_JAW_GAP_M = 0.01  # and on the moving jaw's side
JAW_REACH_M = 0.07  # moving-jaw pivot to the tcp, along the jaw (sim/so101.urdf)
TILTS_RAD = np.radians([0, 5, 10, 15, 20, 25, 30])
JAW_BELOW_TCP_M = 0.025  # the jaw tips reach this far past the tcp
JAW_HALF_WIDTH_M = 0.011
TIP_ABOVE_TABLE_M = 0.003
JAW_THICKNESS_M = 0.011  # a jaw's thickness, plus a little
TILT_LEVER_M = 0.035  # how far along the jaw a tilt matters: tips below the tcp, faces above it
CLEAR_ABOVE_M = 0.03  # jaw tips above the object's top on the way in
ANY_DIRECTION_CANDIDATES = 12
CLOSED = 0.0  # gripper command when squeezing: the jaw pushes until the object stops it
# phase durations in seconds
SWING_S, DESCEND_S, CLOSE_S, SETTLE_S, LIFT_S = 1.4, 1.1, 0.4, 0.3, 1.0


def gripper_opening_command(kind: ObjectKind) -> float:
    """Gripper command (0-100) that clears the object from the tcp up to its top: the moving jaw swings
    about a pivot above the tcp, so its gap narrows toward the pivot."""
    clear = kind.width_m + FIXED_JAW_GAP_M + MOVING_JAW_GAP_M
    top_reach = JAW_REACH_M - max(kind.height_m - kind.grasp_height_m, 0.0)  # pivot to the object's top
    angle = math.asin(min(clear / min(JAW_REACH_M, max(top_reach, 1e-3)), 1.0))
    return float(so101.gripper_to_lerobot(angle))


def smoothstep(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * (3 - 2 * s)


@dataclass(frozen=True)
class Neighbour:
    """Another object on the table: where it stands (table frame, metres) and how much room it takes."""

    xy: np.ndarray
    footprint_m: float


def plan_pick(start: np.ndarray, target_xy: np.ndarray, kind: ObjectKind, yaw: float,
              neighbours: list[Neighbour], fps: float) -> np.ndarray:
    """The whole pick as joint targets (steps, 6) in LeRobot units, from the joints at `start` (6,).
    Of the grasps that take the object (closing directions by its symmetry, the fixed jaw on either side),
    the first whose every pose is in reach, taking the gripper as it usually stands first and the most
    room from the neighbours next. Raises kinematics.Unreachable when none is."""
    start = np.asarray(start, dtype=np.float64)
    # the jaw tips reach 2.5 cm past the tcp: low objects are taken with the tips just above the table
    grasp_z = max(kind.grasp_height_m, JAW_BELOW_TCP_M + TIP_ABOVE_TABLE_M)
    above_z = max(grasp_z + APPROACH_ABOVE_M, kind.height_m + JAW_BELOW_TCP_M + CLEAR_ABOVE_M)
    open_cmd = gripper_opening_command(kind)
    centre = table_to_arm(np.asarray(target_xy, dtype=np.float64))
    try:
        tilt = _least_tilt(centre, (grasp_z, above_z), 0.0)
    except kinematics.Unreachable:  # the centre is out of reach; a tcp beside it may not be
        tilt = float(TILTS_RAD[-1])
    grasps = []
    for flipped in (False, True):  # the gripper half a turn about the tool axis: only where needed
        options = []
        for closing in _closing_yaws(kind, yaw):
            try:
                options.append(_place_jaws(centre, closing, kind.width_m, grasp_z, open_cmd, tilt, neighbours,
                                           flipped) + (flipped,))
            except kinematics.Unreachable:
                continue
        grasps += sorted(options, key=lambda option: -option[2])
    errors = []
    for tcp, closing_yaw, _, flipped in grasps:
        try:
            return _pick_steps(start, tcp, closing_yaw, flipped, tilt, grasp_z, above_z, open_cmd, fps)
        except kinematics.Unreachable as error:
            errors.append(error)
    if errors:  # the first: the usual grasp with the most room, and why it is out of reach
        raise kinematics.Unreachable(f"no grasp of the {kind.name} is in reach: {errors[0]}")
    raise kinematics.Unreachable(f"no grasp of the {kind.name} at {np.round(centre, 3)} (arm frame) is in reach")


def _pick_steps(start: np.ndarray, tcp: np.ndarray, closing_yaw: float, flipped: bool, tilt: float,
                grasp_z: float, above_z: float, open_cmd: float, fps: float) -> np.ndarray:
    """The pick's joint targets (steps, 6) for a grasp with the tcp at `tcp` (arm frame, 2,); raises
    Unreachable if any pose is out of reach."""
    low_z = grasp_z
    pull = float(np.clip(np.hypot(*tcp) - COMFORT_REACH_M, -LIFT_PULL_M, LIFT_PULL_M))
    for _ in range(3):  # a leaning jaw's lower corner dips toward the table: go that much higher
        grasp_z = low_z + JAW_HALF_WIDTH_M * math.sin(tilt)
        tilt = max(tilt, _least_tilt(tcp, (grasp_z, above_z), closing_yaw, flipped),
                   _least_tilt(_pulled(tcp, pull), (grasp_z + LIFT_M,), closing_yaw, flipped))

    def pose(z: float, gripper: float, pull: float = 0.0) -> np.ndarray:
        body = _tool_ik(np.array([*_pulled(tcp, pull), z]), closing_yaw, tilt, flipped)
        return np.append(so101.to_lerobot(np.append(body, so101.LOWER_RAD[so101.GRIPPER]))[:5], gripper)

    def ramp(seconds: float) -> list[float]:
        n = max(1, round(seconds * fps))
        return [smoothstep(i / n) for i in range(1, n + 1)]

    above, down = pose(above_z, open_cmd), pose(grasp_z, open_cmd)
    steps = [start + s * (above - start) for s in ramp(SWING_S)]
    steps += [pose(above_z + (grasp_z - above_z) * s, open_cmd) for s in ramp(DESCEND_S)]
    steps += [np.append(down[:5], open_cmd + s * (CLOSED - open_cmd)) for s in ramp(CLOSE_S)]
    steps += [np.append(down[:5], CLOSED)] * max(1, round(SETTLE_S * fps))
    steps += [pose(grasp_z + LIFT_M * s, CLOSED, pull * s) for s in ramp(LIFT_S)]
    return np.array(steps, dtype=np.float32)


def _closing_yaws(kind: ObjectKind, yaw: float) -> list[float]:
    """Closing directions (arm frame) that take an object of this kind standing at `yaw`, by its symmetry."""
    across = yaw + math.pi / 2 - ARM_BASE_YAW  # across the object's narrow side
    turns = kind.grasp_turns or ANY_DIRECTION_CANDIDATES
    return [across + k * 2 * math.pi / turns for k in range(turns)]


def _place_jaws(centre: np.ndarray, closing_yaw: float, width: float, grasp_z: float, open_cmd: float,
                tilt: float, neighbours: list[Neighbour], flipped: bool = False) -> tuple[np.ndarray, float, float]:
    """(tcp, closing yaw, clearance): the fixed jaw's face sits on the tcp, so the tcp goes beside the
    object; clearance is how far the open jaws stay from the other objects (metres, arm frame).
    A tool leaning outward by `tilt` swings the jaw faces toward the object where the closing axis
    runs along the arm's reach, so the fixed jaw keeps that much more distance."""
    tcp = centre.copy()
    for _ in range(3):  # which side the fixed jaw ends up on depends on the solution's pan and roll
        joints = _tool_ik(np.array([*tcp, grasp_z]), closing_yaw, tilt, flipped)
        side_yaw = kinematics.closing_axis_yaw(joints)
        side = np.array([math.cos(side_yaw), math.sin(side_yaw)])
        along_reach = abs(math.cos(side_yaw - joints[0]))
        offset = width / 2 + FIXED_JAW_GAP_M + TILT_LEVER_M * math.sin(tilt) * along_reach
        tcp = centre - offset * side
    gap = JAW_REACH_M * math.sin(so101.gripper_from_lerobot(open_cmd))
    jaw_ends = (tcp - JAW_THICKNESS_M * side, tcp + (gap + JAW_THICKNESS_M) * side)
    clearance = min((_distance_to_segment(table_to_arm(n.xy), *jaw_ends) - n.footprint_m for n in neighbours),
                    default=1.0)
    return tcp, closing_yaw, clearance


def _least_tilt(tcp: np.ndarray, heights: tuple[float, ...], closing_yaw: float, flipped: bool = False) -> float:
    """The smallest outward lean of the tool that keeps every pose of the plan in range."""
    for tilt in TILTS_RAD:
        try:
            for z in heights:
                _tool_ik(np.array([*tcp, z]), closing_yaw, tilt, flipped)
            return tilt
        except kinematics.Unreachable:
            continue
    return _tool_ik(np.array([*tcp, max(heights)]), closing_yaw, 0.0, flipped)  # raises


def _tool_ik(tcp_xyz: np.ndarray, closing_yaw: float, tilt: float, flipped: bool) -> np.ndarray:
    """kinematics.top_down_ik (5,) radians; `flipped` turns the gripper half a turn about the tool axis:
    the jaws close along the same line with the fixed jaw on the other side (where the wrist's range
    allows), which moves the tcp to the object's other side."""
    joints = kinematics.top_down_ik(tcp_xyz, closing_yaw, tilt)
    if flipped:
        low, high = so101.LOWER_RAD[4], so101.UPPER_RAD[4]
        roll = joints[4] + math.pi if joints[4] + math.pi <= high else joints[4] - math.pi
        if not low <= roll <= high:
            raise kinematics.Unreachable(f"wrist_roll {math.degrees(joints[4]):.1f} deg cannot turn half a turn "
                                         f"within its range")
        joints[4] = roll
    return joints


def can_grasp(kind: ObjectKind, xy: np.ndarray, yaw: float) -> bool:
    """Whether some grasp picks an object of `kind` standing at `xy` (table frame, metres) and `yaw` with
    every pose of the pick in reach; other objects only choose between such grasps, never rule all out."""
    try:
        plan_pick(np.zeros(6), xy, kind, yaw, [], fps=10.0)  # reach depends on neither the start nor the fps
    except kinematics.Unreachable:
        return False
    return True


def plan_for_scene(start: np.ndarray, target_xy: np.ndarray, request: str,
                   objects: list[tuple[str, float, float, float]], fps: float) -> np.ndarray:
    """The pick of the requested kind among `objects` [(kind, x, y, yaw)] as they stand (table frame), from
    the joints at `start` (6,) in LeRobot units: (steps, 6) LeRobot units. The gym expert and the expert node
    both plan through here. ValueError when the scene does not hold exactly one object of that kind."""
    mine = [o for o in objects if o[0] == request]
    if len(mine) != 1:
        raise ValueError(f"the scene has {len(mine)} objects of kind {request!r} (kinds: "
                         f"{[o[0] for o in objects]}): no plan")
    neighbours = [Neighbour(np.array([x, y]), object_kind(kind).footprint_m) for kind, x, y, _ in objects
                  if kind != request]
    return plan_pick(start, target_xy, object_kind(request), mine[0][3], neighbours, fps)


def plan_window(plan: np.ndarray | None, step: int, size: int) -> np.ndarray:
    """Actions `step` .. `step + size - 1` of a plan (size, 6), holding its last pose past the end."""
    if plan is None:
        raise RuntimeError("no plan yet: plan the pick after the episode starts")
    index = np.minimum(np.arange(step, step + size), len(plan) - 1)
    return plan[index].astype(np.float32)


def _pulled(tcp: np.ndarray, distance: float) -> np.ndarray:
    """The point `distance` closer to the pan axis (arm frame; negative: farther)."""
    return tcp * (1.0 - distance / max(float(np.hypot(*tcp)), 1e-9))


def _distance_to_segment(point: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    along = np.clip(np.dot(point - a, b - a) / max(np.dot(b - a, b - a), 1e-12), 0.0, 1.0)
    return float(np.linalg.norm(point - (a + along * (b - a))))
