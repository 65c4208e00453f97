"""Expert node: the scripted expert as a policy on the same topics as ACT, so the graph runs before a
trained checkpoint exists.

At each episode start it plans the pick from what the topics say: the task (episode/start), the
objects' kinds and poses (scene/objects), the target (target/point) and the joints (joint_states) of
the first observation it hears once those are in: tick 0 in lockstep, where the sim waits for that
answer; whichever tick in realtime, where the sim sends nothing twice. Then it answers the
observations `replan_every` ticks apart with `chunk_size`-step chunks of that plan on act/action_chunk,
stamped like the policy node's. Topic names are relative: a launch `namespace` moves them all.
A scene it cannot plan (no reachable grasp) is logged as a failed episode and answered with chunks that
hold the arm where it started, so the sim runs the episode out to its step limit (a failure) and the next
one starts.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from act_node import so101
from act_node.nodes.chunk_path import ChunkPath
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    episode_start,
    parsed,
    scene_objects,
    serialized_chunk,
    stamped_joint_positions,
    target_point,
)
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.observation import requested_kind
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.planner import plan_for_scene, plan_window


class ExpertNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_expert", **node_options)  # e.g. parameter_overrides, for tests
        values = declare_node(self, "act_expert")
        self.fps, self.chunk_size = float(values["fps"]), int(values["chunk_size"])
        self.replan_every = int(values["replan_every"])
        self.episode: tuple[float, str] | None = None
        self.scene: tuple[float, list] | None = None
        self.target: tuple[float, np.ndarray] | None = None
        self.plan: np.ndarray | None = None
        self.joints: tuple[float, np.ndarray] | None = None
        self.answered_s = -np.inf
        self.answer: bytes | None = None  # the last chunk sent, for the observation stamped answered_s
        self.plan_tick = 0  # the episode tick the plan starts at
        self.due_tick = 0  # the next tick to answer
        self.sent = self.resent = self.planned = self.plan_failures = 0
        self.last_failure = ""
        self.diagnostics = Diagnostics(self, "scripted expert", self.fill_diagnostics)
        self.chunk_pub = self.create_publisher(JointTrajectory, "act/action_chunk", RELIABLE)
        self.path = ChunkPath(self)  # the chunk's tool path for RViz, act/chunk_path
        self.create_subscription(Header, "episode/start",
                                 parsed(self, episode_start, "episode start", self.on_episode), LATCHED)
        self.create_subscription(MarkerArray, "scene/objects", parsed(self, scene_objects, "scene", self.on_scene),
                                 LATCHED)
        self.create_subscription(PointStamped, "target/point", parsed(self, target_point, "target", self.on_target),
                                 LATCHED)
        self.create_subscription(JointState, "joint_states",
                                 parsed(self, stamped_joint_positions, "joint state", self.on_joints, 2.0), SENSOR)

    # messages arrive in any order across topics: each callback stores, then tries to answer
    def on_episode(self, start: tuple[float, dict]) -> None:
        start_s, info = start
        self.episode = (start_s, requested_kind(info.get("task", "")))
        self.plan, self.answered_s, self.answer = None, -np.inf, None
        self.plan_tick = self.due_tick = 0
        self.try_answer()

    def on_scene(self, scene: tuple[float, list]) -> None:
        self.scene = scene
        self.try_answer()

    def on_target(self, target: tuple[float, np.ndarray]) -> None:
        self.target = target
        self.try_answer()

    def on_joints(self, joints: tuple[float, np.ndarray]) -> None:
        if joints[0] == self.answered_s and self.answer is not None:
            # a lockstep sim says an observation again only while it waits for its chunk: the chunk was lost
            # (sent before the sim's subscription matched, say); send it again (the sim merges a copy once)
            self.chunk_pub.publish(self.answer)
            self.resent += 1
            return
        self.joints = joints
        self.try_answer()

    def try_answer(self) -> None:
        """Answer the first joint state of a due tick. The plan starts from the first joint state heard
        once this episode's scene and target are in (tick 0 in lockstep, where the sim waits for it;
        whichever tick in realtime, where nothing is sent twice); then every `replan_every` ticks."""
        if self.episode is None or self.joints is None:
            return
        start_s, request = self.episode
        stamp, positions = self.joints
        tick = round((stamp - start_s) * self.fps)
        if tick < self.due_tick or stamp <= self.answered_s:
            return
        if self.plan is None:
            if not self._plan(positions, start_s, request):
                return
            self.plan_tick = tick
        chunk = plan_window(self.plan, tick - self.plan_tick, self.chunk_size)
        chunk_rad = so101.from_lerobot(chunk)
        self.answer = serialized_chunk(chunk_rad, stamp, self.fps)
        self.chunk_pub.publish(self.answer)
        self.sent += 1
        self.path.publish(chunk_rad, stamp)
        self.answered_s, self.due_tick = stamp, tick + self.replan_every

    def _plan(self, start: np.ndarray, start_s: float, request: str) -> bool:
        if self.scene is None or self.scene[0] < start_s or self.target is None or self.target[0] < start_s:
            self.get_logger().warn("waiting for this episode's scene and target", throttle_duration_sec=2.0)
            return False
        start_lerobot = so101.to_lerobot(start)
        try:
            self.plan = plan_for_scene(start_lerobot, self.target[1], request, self.scene[1], self.fps)
        except Unreachable as error:
            self.plan = start_lerobot[None].astype(np.float32)  # (1, 6): hold the start, the episode fails
            self.plan_failures += 1
            self.last_failure = f"cannot plan the pick of the {request}: {error}"
            self.get_logger().error(f"episode failed: cannot plan the pick of the {request} ({error}); "
                                    f"holding the arm until the episode ends")
            return True
        except ValueError as error:  # the scene does not hold exactly one object of that kind: no chunks
            self.plan_failures += 1
            self.last_failure = f"cannot plan the pick: {error}"
            self.get_logger().error(f"cannot plan the pick: {error}")
            return False
        self.get_logger().info(f"planned {len(self.plan)} steps to pick up the {request}")
        self.planned += 1
        return True

    def fill_diagnostics(self, report: Report) -> None:
        if self.diagnostics.recent("failures", self.plan_failures):
            report.warn(self.last_failure)
        elif self.episode is not None and self.plan is None:
            report.warn("waiting for this episode's scene, target and joint states")
        report.update({"episode_from": "none" if self.episode is None else f"t={self.episode[0]:.3f} s",
                       "plans": self.planned, "plan_failures": self.plan_failures, "last_failure": self.last_failure,
                       "chunks_sent": self.sent, "chunks_resent": self.resent})

    def destroy_node(self) -> None:
        self.diagnostics.final()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(ExpertNode, "act_expert_node", args)


if __name__ == "__main__":
    main()
