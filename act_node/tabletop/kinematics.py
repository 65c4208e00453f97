"""Closed-form inverse kinematics of the SO-101 for top-down grasps.

The arm is a pan joint and a planar chain (shoulder_lift, elbow_flex, wrist_flex) in the vertical plane
the pan selects, then wrist_roll about the tool axis. Pointing the tool straight down fixes
shoulder_lift + elbow_flex + wrist_flex = 90 degrees (less a small outward tilt where the wrist would pass
its range close to the base), which leaves a two-link problem for the wrist.
Lengths come from act_node.so101; the arm's base frame has x forward, z up.
"""

from __future__ import annotations

import math

import numpy as np

from act_node import so101

# tcp offset from the wrist_roll joint along the tool axis (sim/so101.urdf's tcp_joint)
ROLL_TO_TCP = 0.075
LIFT_AXIS = np.array([so101.PAN_TO_LIFT_X, so101.BASE_TO_PAN_Z + so101.PAN_TO_LIFT_Z])  # (u, z) in the arm plane
_A = math.hypot(*so101.UPPER_ARM)
_A_LEAN = math.atan2(so101.UPPER_ARM[1], so101.UPPER_ARM[0])  # upper arm leans forward of the lift-elbow line
_B = math.hypot(*so101.FOREARM)
_B_RISE = math.atan2(so101.FOREARM[1], so101.FOREARM[0])  # wrist sits slightly above the forearm's line
WRIST_TO_TCP = so101.WRIST_TO_ROLL + ROLL_TO_TCP


class Unreachable(ValueError):
    """The requested tool pose is outside the arm's workspace or joint ranges."""


def top_down_ik(tcp_xyz: np.ndarray, closing_yaw: float, tilt: float = 0.0) -> np.ndarray:
    """Joint angles (5,) in radians, body joints only, that put the tcp at `tcp_xyz` (arm base frame,
    metres) with the tool pointing down (leaning `tilt` radians outward, away from the base) and the jaws
    closing along the horizontal direction `closing_yaw` (radians, arm base frame). Raises Unreachable."""
    x, y, z = (float(v) for v in tcp_xyz)
    pan = math.atan2(y, x)
    reach = math.hypot(x, y)
    tool_dir = -math.pi / 2 + tilt  # from the forward axis toward up
    # the wrist_flex joint, from the lift axis
    wrist = np.array([reach, z]) - WRIST_TO_TCP * np.array([math.cos(tool_dir), math.sin(tool_dir)]) - LIFT_AXIS
    distance = float(np.hypot(*wrist))
    cos_bend = (distance**2 - _A**2 - _B**2) / (2 * _A * _B)
    if not -1.0 <= cos_bend <= 1.0:
        raise Unreachable(f"tcp {tcp_xyz} is {distance:.3f} m from the shoulder, reach is "
                          f"{abs(_A - _B):.3f}-{_A + _B:.3f} m")
    bend = -math.acos(cos_bend)  # elbow above the wrist: the forearm turns down from the upper arm
    # directions measured from the forward axis toward up
    upper_dir = math.atan2(wrist[1], wrist[0]) - math.atan2(_B * math.sin(bend), _A + _B * math.cos(bend))
    fore_dir = upper_dir + bend
    # at zero the upper arm points at (pi/2 - lean), the forearm at +rise; positive joints pitch down
    lift = (math.pi / 2 - _A_LEAN) - upper_dir
    elbow = _B_RISE - fore_dir - lift
    wrist_flex = -tool_dir - lift - elbow
    # roll turns the jaws' closing axis (the tool's y) away from the pan plane's normal
    roll = _wrap_half_turn(pan + math.pi / 2 - closing_yaw)
    joints = np.array([pan, lift, elbow, wrist_flex, roll])
    low, high = so101.LOWER_RAD[:5], so101.UPPER_RAD[:5]
    if np.any(joints < low) or np.any(joints > high):
        bad = [f"{name} {math.degrees(v):.1f} deg" for name, v, lo, hi in zip(so101.BODY_JOINTS, joints, low, high)
               if not lo <= v <= hi]
        raise Unreachable(f"tcp {np.round(tcp_xyz, 3)} needs {', '.join(bad)}: outside the joint ranges")
    return joints


def _wrap_half_turn(angle: float) -> float:
    """The jaws are symmetric enough to close along either sense: fold into [-pi/2, pi/2)."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


def closing_axis_yaw(joints_rad: np.ndarray) -> float:
    """Yaw (arm base frame) of the direction the moving jaw closes away from (the tool's +y axis), for a
    top-down pose: the fixed jaw's face lies on the tcp, the moving jaw on this side of it."""
    pan, roll = float(joints_rad[0]), float(joints_rad[4])
    return pan + math.pi / 2 - roll
