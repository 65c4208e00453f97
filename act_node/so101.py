"""The SO-101 arm: joint names, limits, link lengths, and the one conversion between ROS units and
LeRobot's dataset units.

Facts from the public SO-101 description (TheRobotStudio SO-ARM100, as shipped in LeRobot's
`so101_new_calib`): joint order and ranges (zero at the middle of each range), link offsets, and the
STS3215 servo's torque. ROS topics use radians (REP-103); datasets and checkpoints use LeRobot's
SO-101 convention: degrees for the five body joints and 0-100 for the gripper (0 closed, 100 open),
spread linearly over the gripper joint's range.
"""

from __future__ import annotations

import math

import numpy as np

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
BODY_JOINTS = JOINT_NAMES[:5]
GRIPPER = JOINT_NAMES.index("gripper")

# Joint ranges in radians, from the SO-101 description.
LOWER_RAD = np.array([-1.91986, -1.74533, -1.69, -1.65806, -2.74385, -0.17453])
UPPER_RAD = np.array([1.91986, 1.74533, 1.69, 1.65806, 2.84121, 1.74533])

# STS3215 servo (12 V): stall torque about 3.35 N m (the description's force range), no-load speed
# 0.222 s per 60 degrees, i.e. about 4.7 rad/s.
MAX_TORQUE_NM = 3.35
# LeRobot's so_follower configures the gripper servo to spare it while it squeezes an object: Max_Torque_Limit
# 50%, Protection_Current 50%, and Overload_Torque 25%: once stalled against the object (holding it) the servo
# gives a quarter of its torque. The simulated gripper holds with that quarter. At the full 3.35 N m the
# pybullet jaws press an object with about 25 N at one contact point each and squeeze it out of the grasp (how
# often: docs/measured_defaults.md; tests/test_tabletop.py pins the hold).
GRIPPER_TORQUE_NM = 0.25 * MAX_TORQUE_NM
MAX_VELOCITY_RAD_S = math.radians(60) / 0.222

# Link lengths in metres (the description's joint-to-joint offsets).
BASE_TO_PAN_Z = 0.0624  # table top to the shoulder_pan joint
PAN_TO_LIFT_X = 0.0304  # shoulder_lift axis ahead of the pan axis
PAN_TO_LIFT_Z = 0.0542  # and above it
UPPER_ARM = (0.11257, 0.028)  # shoulder_lift -> elbow_flex: along the arm, and the bend off its line
FOREARM = (0.1349, 0.0052)  # elbow_flex -> wrist_flex
WRIST_TO_ROLL = 0.0611  # wrist_flex -> wrist_roll
ROLL_TO_TIP = 0.0981  # wrist_roll -> between the jaw tips (the description's gripperframe)

LEROBOT_UNITS = ("deg",) * 5 + ("0-100",)


def _check_last_axis(values: np.ndarray) -> None:
    if values.shape[-1:] != (len(JOINT_NAMES),):
        raise ValueError(f"expected {len(JOINT_NAMES)} joint values {JOINT_NAMES}, got shape {values.shape}")


def gripper_to_lerobot(radians):
    """The gripper joint's angle (radians) -> LeRobot's 0-100 (0 closed, 100 open), linear over its range."""
    return 100.0 * (radians - LOWER_RAD[GRIPPER]) / (UPPER_RAD[GRIPPER] - LOWER_RAD[GRIPPER])


def gripper_from_lerobot(value):
    """LeRobot's gripper 0-100 -> the joint's angle in radians."""
    return LOWER_RAD[GRIPPER] + value / 100.0 * (UPPER_RAD[GRIPPER] - LOWER_RAD[GRIPPER])


def to_lerobot(radians: np.ndarray) -> np.ndarray:
    """Joint positions (..., 6) in radians -> LeRobot's SO-101 units (degrees, gripper 0-100)."""
    return _converted(radians, np.degrees, gripper_to_lerobot)


def from_lerobot(values: np.ndarray) -> np.ndarray:
    """LeRobot's SO-101 units (..., 6) -> radians."""
    return _converted(values, np.radians, gripper_from_lerobot)


def _converted(values: np.ndarray, body, gripper) -> np.ndarray:
    """(..., 6) with the five body joints through `body` and the gripper through `gripper`, as float64."""
    values = np.asarray(values, dtype=np.float64)
    _check_last_axis(values)
    out = body(values)
    out[..., GRIPPER] = gripper(values[..., GRIPPER])
    return out


LOWER_LEROBOT = to_lerobot(LOWER_RAD)
UPPER_LEROBOT = to_lerobot(UPPER_RAD)
