"""The robot description for RViz and TF: the arm's URDF (sim/so101.urdf) under a `table` root, with an
optical frame for each camera. The sim node publishes it on robot_description; on a ROS 2 install
robot_state_publisher gets the same text and turns it and joint_states into TF.

    table ─fixed: ARM_BASE_XY, ARM_BASE_YAW─> base_link ─ ... ─> wrist_camera ─fixed─> wrist_optical
      ├─fixed: eye, looking at target─> front_optical
      └─fixed: eye, looking at target─> top_optical

The frames are the ones the images, CameraInfo and the markers name: `table`, `<camera>_optical`
(x right, y down, z forward, as ROS's optical frames).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from act_node import so101
from act_node.paths import share_dir
from act_node.table_frame import TABLE_FRAME
from act_node.tabletop.cameras import CAMERAS, link_optical, look_at
from act_node.tabletop.world import ARM_BASE_XY, ARM_BASE_YAW


def rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF's roll, pitch, yaw (fixed axes: R = Rz(yaw) Ry(pitch) Rx(roll)) of a (3, 3) rotation."""
    pitch = math.asin(max(-1.0, min(1.0, -rotation[2, 0])))
    if abs(math.cos(pitch)) < 1e-9:  # gimbal lock: put it all in yaw
        return 0.0, pitch, math.atan2(-rotation[0, 1], rotation[1, 1])
    return (math.atan2(rotation[2, 1], rotation[2, 2]), pitch, math.atan2(rotation[1, 0], rotation[0, 0]))


def _fixed(parent: str, child: str, xyz, rotation: np.ndarray) -> str:
    """A fixed URDF joint from `parent` to `child`."""
    position = " ".join(f"{v:.6f}" for v in xyz)
    angles = " ".join(f"{v:.6f}" for v in rpy(rotation))
    return (f'  <joint name="{parent}_to_{child}" type="fixed"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{position}" rpy="{angles}"/></joint>\n')


def robot_description() -> str:
    """The URDF text: the arm at its place on the table, and every camera's optical frame."""
    urdf = (share_dir() / "sim" / "so101.urdf").read_text()
    end = urdf.rindex("</robot>")
    base = np.array([[math.cos(ARM_BASE_YAW), -math.sin(ARM_BASE_YAW), 0], [math.sin(ARM_BASE_YAW),
                     math.cos(ARM_BASE_YAW), 0], [0, 0, 1.0]])
    frames = [f'  <link name="{TABLE_FRAME}"/>\n', _fixed(TABLE_FRAME, "base_link", (*ARM_BASE_XY, 0.0), base)]
    for name, camera in CAMERAS.items():
        frames.append(f'  <link name="{name}_optical"/>\n')
        if "eye" in camera:
            eye, target = np.asarray(camera["eye"], float), np.asarray(camera["target"], float)
            frames.append(_fixed(TABLE_FRAME, f"{name}_optical", eye, look_at(eye, target)))
        else:  # rides on an arm link, looking along the link's +x
            frames.append(_fixed(camera["link"], f"{name}_optical", (0.0, 0.0, 0.0), link_optical(np.eye(3))))
    return urdf[:end] + "\n  <!-- added for RViz and TF: act_node/description.py -->\n" + "".join(frames) + urdf[end:]


@dataclass(frozen=True)
class _Joint:
    name: str
    parent: str
    origin: np.ndarray  # (4, 4) parent -> joint frame at zero
    axis: np.ndarray | None  # unit (3,) for a revolute joint, None for a fixed one


def _rotation_about(axis: np.ndarray, angle: float) -> np.ndarray:
    """(3, 3) rotation by `angle` rad about a unit `axis` (Rodrigues)."""
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


_TOOL_CHAIN: ArmChain | None = None


def tool_point(joints_rad) -> np.ndarray:
    """The tool centre point in the table frame (metres) for the six joint positions in radians: (3,). What
    environment_state's target_tool layout is built from on the graph (the sim env reads the same point from
    pybullet). ValueError when the joints are not six finite numbers."""
    global _TOOL_CHAIN
    joints = np.asarray(joints_rad, dtype=np.float64).reshape(-1)
    if joints.shape != (len(so101.JOINT_NAMES),) or not np.all(np.isfinite(joints)):
        raise ValueError(f"the tool's place needs the {len(so101.JOINT_NAMES)} joint positions (radians, finite), "
                         f"got {joints_rad!r}")
    if _TOOL_CHAIN is None:
        _TOOL_CHAIN = ArmChain("tcp")
    return _TOOL_CHAIN.positions(joints[None])[0]


class ArmChain:
    """Forward kinematics along the description's joints, from `table` to a link: where that link goes for
    given joint positions. Used for the chunk's path in RViz; the numbers are the URDF's own."""

    def __init__(self, tip: str = "tcp", description: str | None = None):
        robot = ET.fromstring(description or robot_description())
        by_child = {}
        for joint in robot.iter("joint"):
            origin = joint.find("origin")
            xyz = [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()]
            angles = [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()]
            transform = np.eye(4)
            transform[:3, :3] = (_rotation_about(np.array([0.0, 0, 1]), angles[2])
                                 @ _rotation_about(np.array([0.0, 1, 0]), angles[1])
                                 @ _rotation_about(np.array([1.0, 0, 0]), angles[0]))
            transform[:3, 3] = xyz
            axis = None
            if joint.get("type") in ("revolute", "continuous"):
                axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
                axis = axis / np.linalg.norm(axis)
            by_child[joint.find("child").get("link")] = _Joint(joint.get("name"), joint.find("parent").get("link"),
                                                               transform, axis)
        chain, link = [], tip
        while link in by_child:
            chain.append(by_child[link])
            link = by_child[link].parent
        if link != TABLE_FRAME:
            raise ValueError(f"link {tip!r} does not hang from {TABLE_FRAME!r} in the description (root: {link!r})")
        self.tip = tip
        self.chain = chain[::-1]

    def positions(self, joints_rad: np.ndarray, names: tuple[str, ...] = so101.JOINT_NAMES) -> np.ndarray:
        """(N, len(names)) joint positions in rad -> (N, 3) positions of the tip in the table frame, metres."""
        index = {name: k for k, name in enumerate(names)}
        missing = [j.name for j in self.chain if j.axis is not None and j.name not in index]
        if missing:
            raise ValueError(f"joint positions lack {missing} (given {list(names)})")
        out = np.empty((len(joints_rad), 3))
        for row, positions in enumerate(np.asarray(joints_rad, float)):
            transform = np.eye(4)
            for joint in self.chain:
                transform = transform @ joint.origin
                if joint.axis is not None:
                    turn = np.eye(4)
                    turn[:3, :3] = _rotation_about(joint.axis, positions[index[joint.name]])
                    transform = transform @ turn
            out[row] = transform[:3, 3]
        return out
