"""The simulated SO-101 in radians: load it, command joint targets, read its joints and links.

Its limits are the arm's facts from act_node.so101 (ranges, STS3215 torque and speed); a command outside
the ranges is clamped here, once, and the count of clamped joints is returned so the caller can report it.
"""

from __future__ import annotations

import numpy as np

from act_node import so101
from act_node.paths import share_dir
from act_node.tabletop.world import ARM_BASE_XY, ARM_BASE_YAW, World

JAW_FRICTION = 2.0  # rubber pads; pybullet multiplies the two bodies' coefficients
JAW_LINKS = ("gripper_body", "moving_jaw")  # the fixed jaw is part of the gripper body
POSITION_GAIN, VELOCITY_GAIN = 0.6, 1.0  # pybullet's position-control gains, tuned for the STS3215's feel
# torque limits in joint order: the arm's servos at their stall torque, the gripper at its holding torque
TORQUES_NM = np.array([so101.MAX_TORQUE_NM] * 5 + [so101.GRIPPER_TORQUE_NM])


class Robot:
    """The arm in `world`: joints in so101.JOINT_NAMES order, radians."""

    lower, upper = so101.LOWER_RAD, so101.UPPER_RAD

    def __init__(self, world: World):
        self.world = world
        self.body = -1
        self.joints: list[int] = []
        self.links: dict[str, int] = {}

    def load(self, joints_rad: np.ndarray) -> None:
        """The arm on its base at `joints_rad` (6,), holding that pose. Call after `world.clear()`."""
        urdf = share_dir() / "sim" / "so101.urdf"
        self.body, names, self.links = self.world.load_urdf(urdf, ARM_BASE_XY, ARM_BASE_YAW)
        missing = [name for name in so101.JOINT_NAMES if name not in names]
        if missing:
            raise ValueError(f"{urdf} lacks joints {missing}")
        self.joints = [names[name] for name in so101.JOINT_NAMES]
        for joint, angle in zip(self.joints, joints_rad):
            self.world.reset_joint(self.body, joint, angle)
            self.world.set_link_dynamics(self.body, joint, maxJointVelocity=so101.MAX_VELOCITY_RAD_S)
        for jaw in JAW_LINKS:
            self.world.set_link_dynamics(self.body, self.links[jaw], lateralFriction=JAW_FRICTION,
                                         spinningFriction=0.003)
        self.command(joints_rad)

    def command(self, joints_rad: np.ndarray) -> int:
        """Drive towards position targets (6,) radians, clamped to the joint ranges; returns how many joints
        were clamped. The servos' torque and speed limits apply (the gripper's: its holding torque, so101)."""
        joints_rad = np.asarray(joints_rad, dtype=np.float64)
        if joints_rad.shape != (len(so101.JOINT_NAMES),):
            raise ValueError(f"command must have shape (6,) for joints {so101.JOINT_NAMES}, got {joints_rad.shape}")
        if not np.all(np.isfinite(joints_rad)):
            bad = [name for name, value in zip(so101.JOINT_NAMES, joints_rad) if not np.isfinite(value)]
            raise ValueError(f"command has NaN or inf at joints {bad}")
        target = np.clip(joints_rad, self.lower, self.upper)
        self.world.drive_joints(self.body, self.joints, target, TORQUES_NM, so101.MAX_VELOCITY_RAD_S,
                                POSITION_GAIN, VELOCITY_GAIN)
        return int(np.count_nonzero(target != joints_rad))

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions (6,) radians and velocities (6,) rad/s, read once."""
        return self.world.joint_states(self.body, self.joints)

    def joint_positions(self) -> np.ndarray:
        """(6,) radians."""
        return self.joint_state()[0]

    def link_pose(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and rotation (3, 3) of a named link (`tcp`, `wrist_camera`, ...)."""
        return self.world.link_pose(self.body, self.links[link])

    def touches(self, body: int, link: str) -> bool:
        return self.world.touching(self.body, self.links[link], body)
