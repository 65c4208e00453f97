"""Expert node: the scripted expert as a policy on the same topics as ACT, so the graph runs before a
trained checkpoint exists.

At each episode start it plans the pick from what the topics say: the task (/episode/start), the
objects' kinds and poses (/scene/objects), the target (/target/point) and the joints at the start
(/joint_states). Then it answers the observations `replan_every` ticks apart with `chunk_size`-step
chunks of that plan on /act/action_chunk, stamped like the policy node's. A scene it cannot plan (no
reachable grasp) is logged as a failed episode and answered with chunks that hold the arm where it
started, so the sim runs the episode out to its step limit (a failure) and the next one starts.
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
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    MessageError,
    chunk_message,
    episode_start,
    joint_positions,
    scene_objects,
    seconds_of,
    target_point,
)
from act_node.nodes.runner import run
from act_node.tabletop.expert import Neighbour, plan_pick, plan_window
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.objects import kind as object_kind
from act_node.tabletop.scene import requested_kind


class ExpertNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_expert", **node_options)  # e.g. parameter_overrides, for tests
        self.declare_parameter("fps", 30.0)
        self.declare_parameter("chunk_size", 100)
        self.declare_parameter("replan_every", 30)
        self.fps = float(self.get_parameter("fps").value)
        self.chunk_size = int(self.get_parameter("chunk_size").value)
        self.replan_every = int(self.get_parameter("replan_every").value)
        self.episode: tuple[float, str] | None = None
        self.scene: tuple[float, list] | None = None
        self.target: tuple[float, np.ndarray] | None = None
        self.plan: np.ndarray | None = None
        self.joints: tuple[float, np.ndarray] | None = None
        self.answered_s = -np.inf
        self.chunk_pub = self.create_publisher(JointTrajectory, "/act/action_chunk", RELIABLE)
        self.create_subscription(Header, "/episode/start", self.on_episode, LATCHED)
        self.create_subscription(MarkerArray, "/scene/objects", self.on_scene, LATCHED)
        self.create_subscription(PointStamped, "/target/point", self.on_target, LATCHED)
        self.create_subscription(JointState, "/joint_states", self.on_joints, SENSOR)

    # messages arrive in any order across topics: each callback stores, then tries to answer
    def on_episode(self, message: Header) -> None:
        try:
            start_s, info = episode_start(message)
        except MessageError as error:
            self.get_logger().error(f"dropped episode start: {error}")
            return
        self.episode = (start_s, requested_kind(info.get("task", "")))
        self.plan, self.answered_s = None, -np.inf
        self.try_answer()

    def on_scene(self, message: MarkerArray) -> None:
        try:
            self.scene = scene_objects(message)
        except MessageError as error:
            self.get_logger().error(f"dropped scene: {error}")
            return
        self.try_answer()

    def on_target(self, message: PointStamped) -> None:
        try:
            self.target = target_point(message)
        except MessageError as error:
            self.get_logger().error(f"dropped target: {error}")
            return
        self.try_answer()

    def on_joints(self, message: JointState) -> None:
        try:
            self.joints = (seconds_of(message.header.stamp), joint_positions(message))
        except MessageError as error:
            self.get_logger().error(f"dropped joint state: {error}", throttle_duration_sec=2.0)
            return
        self.try_answer()

    def try_answer(self) -> None:
        if self.episode is None or self.joints is None:
            return
        start_s, request = self.episode
        stamp, positions = self.joints
        tick = round((stamp - start_s) * self.fps)
        if tick < 0 or tick % self.replan_every or stamp <= self.answered_s:
            return
        if self.plan is None and (tick != 0 or not self._plan(positions, start_s, request)):
            return  # the plan starts from the joints at the episode's first tick
        chunk = plan_window(self.plan, tick, self.chunk_size)
        self.chunk_pub.publish(chunk_message(so101.from_lerobot(chunk), stamp, self.fps))
        self.answered_s = stamp

    def _plan(self, start: np.ndarray, start_s: float, request: str) -> bool:
        if self.scene is None or self.scene[0] < start_s or self.target is None or self.target[0] < start_s:
            self.get_logger().warn("waiting for this episode's scene and target", throttle_duration_sec=2.0)
            return False
        objects = self.scene[1]
        mine = [o for o in objects if o[0] == request]
        if len(mine) != 1:
            self.get_logger().error(f"the scene has {len(mine)} objects of kind {request!r}: no plan")
            return False
        neighbours = [Neighbour(np.array([x, y]), object_kind(k).footprint_m) for k, x, y, _ in objects
                      if k != request]
        start_lerobot = so101.to_lerobot(start)
        try:
            self.plan = plan_pick(start_lerobot, self.target[1], object_kind(request), mine[0][3], neighbours,
                                  self.fps)
        except Unreachable as error:
            self.plan = start_lerobot[None].astype(np.float32)  # (1, 6): hold the start, the episode fails
            self.get_logger().error(f"episode failed: cannot plan the pick of the {request} ({error}); "
                                    f"holding the arm until the episode ends")
            return True
        self.get_logger().info(f"planned {len(self.plan)} steps to pick up the {request}")
        return True


def main(args: list[str] | None = None) -> None:
    run(ExpertNode, "act_expert_node", args)


if __name__ == "__main__":
    main()
