"""Policy node: camera images + joint states (+ the target) -> one ACT action chunk per answered observation.

Observations are matched by header stamps, never by arrival order (act_node.observation.FrameBounds); which is
answered (`every_n`: one in each block of `replan_every` ticks; `latest`: the newest whenever free), which refused
and why, and what a time that jumps back resets, is act_node.policy_schedule's (no ROS). Chunks go out in radians,
`time_from_start` = k / fps, stamped with the observation's stamp. Bad messages are logged and dropped.

Inference runs on the node's own thread, never in a subscription callback: the callbacks only store
(images and joints keep arriving while the policy thinks) and wake it; it then answers the newest
observation that is due, so in realtime the observations that came in meanwhile are skipped, not queued.

Runs start on the sim's /episode/start or, on an arm, without the sim: a non-empty std_msgs/String on
/act/run starts a run with that task text from now (an empty one ends it), and `run_on_start` starts one
with the `task` parameter as the node comes up.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64, Header, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from act_node import so101
from act_node.nodes import messages
from act_node.nodes.chunk_path import ChunkPath
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR, sent_at
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.policy_inputs import Observer, camera_roles, frame_size_line, load_policy, renderer_mismatch
from act_node.policy_schedule import PolicySchedule, PolicyStats  # noqa: F401 (PolicyStats: importable from here)

# how long destroy_node waits for the inference thread to finish the answer it is computing (one forward pass)
STOP_INFERENCE_S = 10.0


class PolicyNode(Node):
    """ROS only: parameters, topics, the inference thread; what is due, refused or reset: PolicySchedule."""

    def __init__(self, **node_options):
        super().__init__("act_policy", **node_options)  # e.g. parameter_overrides, for tests
        values = declare_node(self, "act_policy")
        # each camera's images arrive on camera/<name>/image_raw: remap that name for another driver's topic
        self.cameras = list(values["cameras"])
        self.joint_names, self.fps = tuple(values["joint_names"]), float(values["fps"])
        checkpoint = values["checkpoint"]
        roles = self.roles = camera_roles(checkpoint, self.cameras)  # ValueError: the yaw reader's cameras missing
        for level, line in roles.said:
            getattr(self.get_logger(), level)(line)
        self.trained_renderer = roles.trained_renderer
        self.act_cameras, self.reader_cameras, self.cameras = roles.act_cameras, roles.reader_cameras, roles.cameras
        topics = [f"camera/{c}/image_raw" for c in self.cameras]
        self._wake, self._ready, self._stopping = threading.Event(), threading.Event(), False  # ready: the node built
        # the inference thread loads the checkpoint itself (see _inference), then answers
        loaded: Future = Future()  # (the policy, the yaw reader or None)
        self._thread = threading.Thread(target=self._inference, name="act-policy-inference", daemon=True,
                                        args=(checkpoint, values["device"], int(values["threads"]), loaded))
        self._thread.start()
        self.policy, self.yaw_reader = loaded.result()  # a refused checkpoint raises here, as the node is built
        self.replan_every = int(values["replan_every"]) or int(self.policy.config.n_action_steps)
        self.observer = observer = Observer(roles, self.policy, values["use_target"], self.yaw_reader,
                                            values["use_scene"], self.fps)
        self.wants_target, self.environment_layout = observer.wants_target, observer.environment_layout
        self.image_sizes = observer.image_sizes  # each camera's size is logged once
        self.frame_sizes: dict[str, tuple[int, int]] = {}
        self.schedule = PolicySchedule.of_parameters(values, self.cameras, self.replan_every, self.wants_target,
                                                     self.get_logger(), self._clock_now, observer.wants_scene)
        self.matcher = self.schedule.matcher
        self.chunk_pub = self.create_publisher(JointTrajectory, "act/action_chunk", RELIABLE)
        self.path = ChunkPath(self, self.joint_names)  # the chunk's tool path for RViz, act/chunk_path
        self.latency_pub = self.create_publisher(Float64, "act/inference_latency", RELIABLE)
        # raw: image_array reads the serialized bytes, rclpy does not build an Image of them; the topics as resolved
        # (remapped: rename_map:=, a driver's topic), for the log
        topics = [self.create_subscription(Image, topic, lambda m, c=camera: self.on_image(c, m), SENSOR,
                                           raw=True).topic_name for camera, topic in zip(self.cameras, topics)]
        self.create_subscription(JointState, "joint_states", messages.parsed(
            self, self._joints_of, "joint state", self.on_joints, 2.0), SENSOR)
        # latched topics: a node that starts late still gets the episode and its target
        self.target_topic = self.schedule.target_topic = self.create_subscription(PointStamped, "target/point",
            messages.parsed(self, messages.target_point, "target", self.on_target), LATCHED).topic_name  # resolved
        if observer.wants_scene:  # the grasp is planned among the run's objects (the sim's, or the scene reader's)
            self.schedule.scene_topic = self.create_subscription(MarkerArray, "scene/objects", messages.parsed(
                self, messages.scene_objects, "scene", self.on_scene), LATCHED).topic_name
        self.create_subscription(Header, "episode/start", messages.parsed(self, messages.episode_start,
                                                                           "episode start", self.on_episode), LATCHED)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)
        # a clock that goes back (use_sim_time and a bag played in a loop): the run's state resets
        self._jump = self.get_clock().create_jump_callback(JumpThreshold(
            min_forward=None, min_backward=Duration(seconds=-self.schedule.jump_back_s), on_clock_change=False),
            post_callback=self.on_clock_jump)
        self.diagnostics = Diagnostics(self, "ACT policy", self.fill_diagnostics, str(self.policy.path))
        self._ready.set()  # the inference thread may answer from here on
        if values["run_on_start"]:
            self.observer.check_task(str(values["task"]))  # ValueError: refused at start, naming the kinds
            self.begin(self.get_clock().now().nanoseconds * 1e-9, str(values["task"]), on_clock=True)
        self.get_logger().info(f"policy {self.policy.path}: cameras {dict(zip(self.cameras, topics))}, "
                               f"chunk {self.policy.chunk_size}, replan every {self.replan_every} ticks, infer "
                               f"{values['infer']}, target {self.environment_layout if self.wants_target else 'no'}")

    episode_start_s = property(lambda self: self.schedule.episode_start_s)  # the run, as the schedule holds it
    task = property(lambda self: self.schedule.task)
    target = property(lambda self: self.schedule.target)

    def _clock_now(self) -> tuple[bool, float]:
        clock = self.get_clock()
        return clock.ros_time_is_active, clock.now().nanoseconds * 1e-9

    # --- callbacks: each hands its data to the schedule, then wakes the inference thread ---------------
    def on_image(self, camera: str, message: bytes) -> None:
        try:
            image, stamp = messages.image_array(message), messages.image_stamp(message)
        except messages.MessageError as error:
            self.schedule.bad_message(camera)
            self.get_logger().error(f"dropped image from camera {camera!r}: {error}", throttle_duration_sec=2.0)
            return
        if self.schedule.ahead_of_clock(camera, stamp):
            return
        if self.frame_sizes.get(camera) != image.shape[:2]:
            self.frame_sizes[camera] = image.shape[:2]  # said once per camera (and again should its size change)
            self.get_logger().info(frame_size_line(camera, image.shape[:2], self.image_sizes.get(camera),
                                                   camera in self.reader_cameras))
        self.schedule.add_image(camera, stamp, image)
        self._wake.set()

    def _joints_of(self, message: JointState) -> tuple[float, np.ndarray]:
        try:
            return messages.stamped_joint_positions(message, self.joint_names)
        except messages.MessageError:
            self.schedule.bad_message("joint_states")
            raise  # parsed() logs it

    def on_joints(self, joints: tuple[float, np.ndarray]) -> None:
        if self.schedule.ahead_of_clock("joint_states", joints[0]):
            return
        resend = self.schedule.add_joints(*joints)
        if resend is not None:
            # a lockstep sim says an observation again only while it waits for its chunk: the chunk was lost
            # (sent before the sim's subscription matched, say); send it again (the sim merges a copy once)
            self.chunk_pub.publish(resend)
            return
        self._wake.set()

    def on_clock_jump(self, jump) -> None:
        """The node's clock went back by more than jump_back_s (ROS time: /clock, a bag played in a loop)."""
        if self.schedule.clock_jumped(-jump.delta.nanoseconds * 1e-9):
            self._wake.set()

    def on_target(self, target: tuple[float, np.ndarray]) -> None:
        self.schedule.set_target(target)
        self._wake.set()

    def on_scene(self, scene: tuple[float, list]) -> None:
        self.schedule.set_scene(scene)
        self._wake.set()

    def on_episode(self, start: tuple[float, dict]) -> None:
        start_s, info = start
        mismatch = renderer_mismatch(self.trained_renderer, info.get("renderer"))
        if mismatch:
            self.get_logger().warn(mismatch, throttle_duration_sec=60.0)
        self.begin(start_s, str(info.get("task", "")))

    def on_run(self, message: String, info) -> None:  # info: rclpy's MessageInfo (the source timestamp)
        if not message.data:
            self.schedule.end()
            self.get_logger().info("run ended: answering nothing until the next one")
            return
        try:
            self.observer.check_task(message.data)
        except ValueError as error:
            self.get_logger().error(f"run request refused: {error}; the run under way (if any) goes on")
            return
        self.begin(sent_at(self, info), message.data, on_clock=True)

    def begin(self, start_s: float, task: str, on_clock: bool = False) -> None:
        """A run (an episode) from `start_s` (PolicySchedule.begin); `on_clock`: read from this node's clock."""
        self.schedule.begin(start_s, task, on_clock)
        self._wake.set()
        self.get_logger().info(f"episode from t={start_s:.3f} s: {task or '(no task text)'}")

    def destroy_node(self) -> None:
        """The inference thread ends first (after the answer it is computing, if any: it publishes and logs,
        so the context must still be valid, which the runner sees to), then the node's entities go."""
        self._stopping = True
        self._ready.set()
        self._wake.set()
        self._thread.join(timeout=STOP_INFERENCE_S)
        if self._thread.is_alive():  # a forward pass that does not end: say it (the runner's dump says where)
            self.get_logger().error(f"the inference thread did not end within {STOP_INFERENCE_S:g} s")
        self.diagnostics.final()  # after the thread: no chunk goes out after the totals it reports
        super().destroy_node()

    def _inference(self, checkpoint: str, device: str, threads: int, loaded: Future) -> None:
        """The inference thread: load the checkpoint, then answer until the node goes.

        Every torch call of the node happens on this thread. With torch's OpenMP pool already started by
        another thread (the main thread loading the checkpoint), the same ACT forward takes longer
        (docs/measured_defaults.md): libgomp's workers for the second thread stop spinning between
        parallel regions once it manages more threads than there are cores."""
        try:
            loaded.set_result(load_policy(checkpoint, device, self.roles, len(self.joint_names), threads))
        except BaseException as error:  # noqa: BLE001 (handed to __init__, which raises it)
            loaded.set_exception(error)
            return
        self._ready.wait()
        self._answer_loop()

    def _answer_loop(self) -> None:
        """Wait for news, answer what is due, repeat until the node goes."""
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                while not self._stopping and self.try_answer():  # until nothing due is left unanswered
                    pass
            except Exception as error:  # a bug must not end the thread silently: say it, keep answering
                self.schedule.failed(error)
                self.get_logger().error(f"inference failed: {error!r}", throttle_duration_sec=2.0)

    # --- answering -------------------------------------------------------------------------------------
    def try_answer(self) -> bool:
        """Answer the newest due observation, if there is one (on the inference thread); whether it did."""
        due = self.schedule.take_due()
        if due is None:
            return False
        if due.reset:  # the run's first answer: the policy's queue starts empty
            self.policy.reset()
        started = time.perf_counter()  # the yaw read (a run's first answer) counts in the answer's time
        try:
            observation = self.observer.observe(due.parts, due.task, due.target, due.serial, due.scene)
        except ValueError as error:
            self.get_logger().error(f"no chunk for t={due.stamp:.3f} s: the checkpoint takes the target and the "
                                    f"request, and the task {due.task!r} gives {error}", throttle_duration_sec=2.0)
            return False
        finally:
            while self.observer.said:  # the grasp planned for the run, or why none was
                level, line = self.observer.said.pop(0)
                getattr(self.get_logger(), level)(line)
        chunk, _ = self.policy(observation, due.task)
        if not self.schedule.inferred(due.stamp, time.perf_counter() - started, due.run):
            return False
        self._publish(so101.from_lerobot(chunk), due.stamp, started)
        return True

    def fill_diagnostics(self, report: Report) -> None:
        """Once a second (executor thread): what the node did and why it answers nothing (PolicySchedule.fill)."""
        self._wake.set()  # the inference thread looks again at an observation that waits for a silent part
        self.schedule.fill(report, self.diagnostics.recent)

    def _publish(self, chunk_rad: np.ndarray, stamp: float, started: float) -> None:
        """The chunk (chunk_size, 6) radians out, answering the observation of `stamp`, with its latency and path."""
        data = messages.serialized_chunk(chunk_rad, stamp, self.fps, self.joint_names)
        self.schedule.sent(stamp, data)
        self.chunk_pub.publish(data)
        latency = time.perf_counter() - started
        self.latency_pub.publish(Float64(data=latency))
        self.path.publish(chunk_rad, stamp)
        self.get_logger().info(f"chunk for t={stamp:.3f} s (tick {self.schedule.tick(stamp)}): "
                               f"{latency * 1000:.0f} ms", throttle_duration_sec=5.0)


def main(args: list[str] | None = None) -> None:
    run(PolicyNode, "act_policy_node", args)


if __name__ == "__main__":
    main()
