"""A scripted expert: pick up the requested object with the target from the observation and closed-form IK.

It acts like a policy: observation in, action (joint targets in LeRobot units) out, and it can answer
with a whole chunk of future actions. What it reads: the target (x, y) from `environment_state`, the
joint positions from `agent_pos`, and, privileged, the requested kind's grasp height and width and the
object's yaw from the simulator (the pen and the key must be taken across their narrow side; the
policy has to see that in the images).

Plan (table frame, tool pointing down): swing above the target with the jaws open (joint space), go
down to the grasp height, close, lift 8 cm while drawing the object toward a comfortable reach, hold.
"""

from __future__ import annotations

import math

import numpy as np

from act_node import so101
from act_node.tabletop import kinematics
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.objects import ObjectKind
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
    low, high = so101.LOWER_RAD[so101.GRIPPER], so101.UPPER_RAD[so101.GRIPPER]
    return 100.0 * (angle - low) / (high - low)


def smoothstep(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * (3 - 2 * s)


class ScriptedExpert:
    """Call `reset(observation)` after each env reset, then `act(observation)` each step
    (or `chunk(observation, n)` for the next n actions)."""

    def __init__(self, env: PickObjectEnv):
        self.env = env.unwrapped
        self.fps = self.env.fps
        self.plan: np.ndarray | None = None  # (steps, 6) LeRobot units
        self.step = 0

    def reset(self, observation: dict) -> None:
        target_xy = np.asarray(observation["environment_state"], dtype=np.float64)
        start = np.asarray(observation["agent_pos"], dtype=np.float64)
        kind = self.env.scene.target.kind
        # the jaw tips reach 2.5 cm past the tcp: low objects are taken with the tips just above the table
        grasp_z = max(kind.grasp_height_m, JAW_BELOW_TCP_M + TIP_ABOVE_TABLE_M)
        above_z = max(grasp_z + APPROACH_ABOVE_M, kind.height_m + JAW_BELOW_TCP_M + CLEAR_ABOVE_M)
        open_cmd = gripper_opening_command(kind)
        centre = table_to_arm(target_xy)
        tilt = self._least_tilt(centre, (grasp_z, above_z), 0.0)
        tcp, closing_yaw = max((self._place_jaws(centre, yaw, kind.width_m, grasp_z, open_cmd, tilt)
                                for yaw in self._closing_yaws()), key=lambda option: option[2])[:2]
        low_z = grasp_z
        pull = float(np.clip(np.hypot(*tcp) - COMFORT_REACH_M, -LIFT_PULL_M, LIFT_PULL_M))
        for _ in range(3):  # a leaning jaw's lower corner dips toward the table: go that much higher
            grasp_z = low_z + JAW_HALF_WIDTH_M * math.sin(tilt)
            tilt = max(tilt, self._least_tilt(tcp, (grasp_z, above_z), closing_yaw),
                       self._least_tilt(_pulled(tcp, pull), (grasp_z + LIFT_M,), closing_yaw))

        def pose(z: float, gripper: float, pull: float = 0.0) -> np.ndarray:
            body = kinematics.top_down_ik(np.array([*_pulled(tcp, pull), z]), closing_yaw, tilt)
            return so101.to_lerobot(np.append(body, so101.LOWER_RAD[so101.GRIPPER]))[:5].tolist() + [gripper]

        above = np.array(pose(above_z, open_cmd))
        steps: list[np.ndarray] = []
        steps += [start + smoothstep(i / self._n(SWING_S)) * (above - start) for i in range(1, self._n(SWING_S) + 1)]
        steps += [np.array(pose(above_z + (grasp_z - above_z) * smoothstep(i / self._n(DESCEND_S)), open_cmd))
                  for i in range(1, self._n(DESCEND_S) + 1)]
        down = np.array(pose(grasp_z, open_cmd))
        steps += [np.append(down[:5], open_cmd + smoothstep(i / self._n(CLOSE_S)) * (CLOSED - open_cmd))
                  for i in range(1, self._n(CLOSE_S) + 1)]
        steps += [np.append(down[:5], CLOSED)] * self._n(SETTLE_S)
        steps += [np.array(pose(grasp_z + LIFT_M * smoothstep(i / self._n(LIFT_S)), CLOSED,
                                pull * smoothstep(i / self._n(LIFT_S))))
                  for i in range(1, self._n(LIFT_S) + 1)]
        self.plan = np.array(steps)
        self.step = 0

    def _closing_yaws(self) -> list[float]:
        """Closing directions (arm frame) that take the requested object, by its symmetry."""
        target = self.env.scene.target
        _, yaw = self.env.world.object_pose(target)
        across = yaw + math.pi / 2 - ARM_BASE_YAW  # across the object's narrow side
        turns = target.kind.grasp_turns or ANY_DIRECTION_CANDIDATES
        return [across + k * 2 * math.pi / turns for k in range(turns)]

    def _place_jaws(self, centre: np.ndarray, closing_yaw: float, width: float, grasp_z: float,
                    open_cmd: float, tilt: float) -> tuple[np.ndarray, float, float]:
        """(tcp, closing yaw, clearance): the fixed jaw's face sits on the tcp, so the tcp goes beside the
        object; clearance is how far the open jaws stay from the other objects (metres, arm frame).
        A tool leaning outward by `tilt` swings the jaw faces toward the object where the closing axis
        runs along the arm's reach, so the fixed jaw keeps that much more distance."""
        tcp = centre.copy()
        for _ in range(3):  # which side the fixed jaw ends up on depends on the solution's pan and roll
            joints = kinematics.top_down_ik(np.array([*tcp, grasp_z]), closing_yaw, tilt)
            side_yaw = kinematics.closing_axis_yaw(joints)
            side = np.array([math.cos(side_yaw), math.sin(side_yaw)])
            along_reach = abs(math.cos(side_yaw - joints[0]))
            offset = width / 2 + FIXED_JAW_GAP_M + TILT_LEVER_M * math.sin(tilt) * along_reach
            tcp = centre - offset * side
        low, high = so101.LOWER_RAD[so101.GRIPPER], so101.UPPER_RAD[so101.GRIPPER]
        gap = JAW_REACH_M * math.sin(low + open_cmd / 100 * (high - low))
        jaw_ends = (tcp - JAW_THICKNESS_M * side, tcp + (gap + JAW_THICKNESS_M) * side)
        clearance = min((_distance_to_segment(table_to_arm(other.xy), *jaw_ends) - other.kind.footprint_m
                         for other in self.env.scene.objects if other is not self.env.scene.target), default=1.0)
        return tcp, closing_yaw, clearance

    @staticmethod
    def _least_tilt(tcp: np.ndarray, heights: tuple[float, ...], closing_yaw: float) -> float:
        """The smallest outward lean of the tool that keeps every pose of the plan in range."""
        for tilt in TILTS_RAD:
            try:
                for z in heights:
                    kinematics.top_down_ik(np.array([*tcp, z]), closing_yaw, tilt)
                return tilt
            except kinematics.Unreachable:
                continue
        return kinematics.top_down_ik(np.array([*tcp, max(heights)]), closing_yaw, 0.0)  # raises

    def _n(self, seconds: float) -> int:
        return max(1, round(seconds * self.fps))

    def act(self, observation: dict) -> np.ndarray:
        """The next action (6,) float32; after the plan ends, hold its last pose."""
        action = self.chunk(observation, 1)[0]
        self.step += 1
        return action

    def chunk(self, observation: dict, size: int) -> np.ndarray:
        """The next `size` actions (size, 6) from the current step, without advancing."""
        if self.plan is None:
            raise RuntimeError("call reset(observation) after the env's reset")
        index = np.minimum(np.arange(self.step, self.step + size), len(self.plan) - 1)
        return self.plan[index].astype(np.float32)

    @property
    def plan_steps(self) -> int:
        return 0 if self.plan is None else len(self.plan)


def _pulled(tcp: np.ndarray, distance: float) -> np.ndarray:
    """The point `distance` closer to the pan axis (arm frame; negative: farther)."""
    return tcp * (1.0 - distance / max(float(np.hypot(*tcp)), 1e-9))


def _distance_to_segment(point: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    along = np.clip(np.dot(point - a, b - a) / max(np.dot(b - a, b - a), 1e-12), 0.0, 1.0)
    return float(np.linalg.norm(point - (a + along * (b - a))))
