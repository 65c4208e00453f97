"""Policy node: camera images + joint states (+ the target) -> one ACT action chunk per answered observation.

Observations are matched by header stamps (within `skew_s`), never by arrival order. In `every_n` mode
it answers the observations `replan_every` ticks apart from the episode's start (lockstep: the sim
waits for exactly those); in `latest` mode it answers the newest complete observation whenever it is
free (realtime). Chunks go out in radians, `time_from_start` = k / fps, stamped with the observation's
stamp. Bad messages are logged and dropped; nothing is inferred from them.

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
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64, Header, String
from trajectory_msgs.msg import JointTrajectory

from act_node import so101
from act_node.checkpoints import readable_checkpoint_cameras, trained_renderer
from act_node.config import DEFAULT_CAMERAS, FPS
from act_node.nodes.chunk_path import ChunkPath
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    MessageError,
    episode_start,
    image_array,
    image_stamp,
    parsed,
    serialized_chunk,
    stamped_joint_positions,
    target_point,
)
from act_node.nodes.parameters import Spec, declare_all, from_config
from act_node.nodes.runner import run
from act_node.observation import ObservationMatcher, build_observation, requested_kind
from act_node.policy import OBS_ENV_STATE, OBS_IMAGES, ChunkPolicy, FeatureSpec

POLICY_PARAMETERS = (
    Spec("checkpoint", "", "LeRobot pretrained_model folder"),
    from_config("device"),
    from_config("threads"),
    Spec("cameras", list(DEFAULT_CAMERAS), "the cameras the checkpoint was trained on, each read from "
         "camera/<name>/image_raw"),
    Spec("joint_names", list(so101.JOINT_NAMES), "joint_states names in the checkpoint's state order"),
    Spec("fps", float(FPS), "ticks a second: chunk steps are 1/fps apart", low=1.0),
    Spec("skew_s", 0.01, "seconds by which images and joints of one observation may differ in stamp", low=0.0,
         high=1.0),
    Spec("infer", "every_n", "every_n: answer the observations replan_every ticks apart (lockstep); latest: the "
         "newest whenever free (realtime)", choices=("every_n", "latest")),
    from_config("replan_every"),
    Spec("use_target", True, "feed target/point and the task's requested kind as environment_state when the "
         "checkpoint takes it"),
    Spec("task", "", "the run's task text when run_on_start"),
    Spec("run_on_start", False, "an arm without the sim: run from the start (else on act/run or episode/start)"),
)


class PolicyNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_policy", **node_options)  # e.g. parameter_overrides, for tests
        values = declare_all(self, POLICY_PARAMETERS)
        threads = int(values["threads"])
        # each camera's images arrive on camera/<name>/image_raw: remap that name for another driver's topic
        self.cameras = list(values["cameras"])
        self.joint_names = tuple(values["joint_names"])
        self.fps = float(values["fps"])
        skew_s = float(values["skew_s"])
        self.infer_mode = values["infer"]
        checkpoint = values["checkpoint"]
        # the sizes it was trained on, so that the check is about the camera set and the state; image sizes
        # are then checked per message
        self.trained = readable_checkpoint_cameras(checkpoint)
        if self.trained == {} and self.cameras:  # a checkpoint that takes no images (joints and target only)
            self.get_logger().info(f"the checkpoint takes no camera images: not subscribing to {self.cameras}")
            self.cameras = []
        topics = [f"camera/{c}/image_raw" for c in self.cameras]
        # what drew the checkpoint's training images: the sim's episode/start says what draws them now
        self.trained_renderer: str | None = None
        try:
            self.trained_renderer = trained_renderer(checkpoint) if self.cameras else None
        except ValueError as error:
            self.get_logger().error(f"not checking the sim's renderer: {error}")
        self._lock = threading.Lock()  # the matcher, the run and the target, between callbacks and the thread
        self._wake = threading.Event()
        self._ready = threading.Event()  # set once the node is built
        self._stopping = False
        # the inference thread loads the checkpoint itself (see _inference), then answers
        loaded: Future[ChunkPolicy] = Future()
        self._thread = threading.Thread(target=self._inference, args=(checkpoint, values["device"], threads,
                                                                      loaded), name="act-policy-inference",
                                        daemon=True)
        self._thread.start()
        self.policy = loaded.result()  # a refused checkpoint raises here, as the node is built
        self.replan_every = int(values["replan_every"]) or int(self.policy.config.n_action_steps)
        self.wants_target = OBS_ENV_STATE in self.policy.config.input_features and values["use_target"]
        self.image_sizes = {c: tuple(self.policy.config.input_features[f"{OBS_IMAGES}.{c}"].shape[1:])
                            for c in self.cameras}
        self.matcher = ObservationMatcher(["joints", *self.cameras], skew_s)
        self._reset_policy = False
        self.target: tuple[float, np.ndarray] | None = None
        self.episode_start_s: float | None = None
        self.task = ""
        self.answered_s = -np.inf
        self.answer: tuple[float, bytes] | None = None  # the last chunk sent and its observation's stamp
        self.chunk_pub = self.create_publisher(JointTrajectory, "act/action_chunk", RELIABLE)
        self.path = ChunkPath(self, self.joint_names)  # the chunk's tool path for RViz, act/chunk_path
        self.latency_pub = self.create_publisher(Float64, "act/inference_latency", RELIABLE)
        for camera, topic in zip(self.cameras, topics):
            # raw: image_array reads the serialized bytes, rclpy does not build an Image of them
            self.create_subscription(Image, topic, lambda m, c=camera: self.on_image(c, m), SENSOR, raw=True)
        self.create_subscription(JointState, "joint_states", parsed(
            self, lambda m: stamped_joint_positions(m, self.joint_names), "joint state", self.on_joints, 2.0), SENSOR)
        # latched topics: a node that starts late still gets the episode and its target
        self.create_subscription(PointStamped, "target/point", parsed(self, target_point, "target", self.on_target),
                                 LATCHED)
        self.create_subscription(Header, "episode/start", parsed(self, episode_start, "episode start",
                                                                  self.on_episode), LATCHED)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)
        self._ready.set()  # the inference thread may answer from here on
        if values["run_on_start"]:
            self.begin(self.get_clock().now().nanoseconds * 1e-9, str(values["task"]))
        self.get_logger().info(f"policy {self.policy.path}: cameras {dict(zip(self.cameras, topics))}, "
                               f"chunk {self.policy.chunk_size}, replan every {self.replan_every} ticks, "
                               f"infer {self.infer_mode}, target {'yes' if self.wants_target else 'no'}")

    def _load(self, checkpoint: str, device: str) -> ChunkPolicy:
        if not checkpoint:
            raise ValueError("parameter 'checkpoint' is empty: give a pretrained_model folder")
        trained = self.trained or {}
        spec = FeatureSpec(cameras={c: trained.get(c, (0, 0)) for c in self.cameras},
                           state_dim=len(self.joint_names))
        return ChunkPolicy.load(checkpoint, device=device, expect=spec)

    # --- callbacks: each stores, then tries to answer ----------------------------------------------------
    def on_image(self, camera: str, message: bytes) -> None:
        try:
            image = image_array(message, expected=self.image_sizes[camera])
            stamp = image_stamp(message)
        except MessageError as error:
            self.get_logger().error(f"dropped image from camera {camera!r}: {error}", throttle_duration_sec=2.0)
            return
        with self._lock:
            self.matcher.add(camera, stamp, image)
        self._wake.set()

    def on_joints(self, joints: tuple[float, np.ndarray]) -> None:
        with self._lock:
            answer = self.answer if self.answer is not None and self.answer[0] == joints[0] else None
            if answer is None:
                self.matcher.add("joints", *joints)
        if answer is not None:
            # a lockstep sim says an observation again only while it waits for its chunk: the chunk was lost
            # (sent before the sim's subscription matched, say); send it again (the sim merges a copy once)
            self.chunk_pub.publish(answer[1])
            return
        self._wake.set()

    def on_target(self, target: tuple[float, np.ndarray]) -> None:
        with self._lock:
            self.target = target
        self._wake.set()

    def on_episode(self, start: tuple[float, dict]) -> None:
        start_s, info = start
        drawn = info.get("renderer")
        if self.trained_renderer and drawn and drawn != self.trained_renderer:
            self.get_logger().warn(f"the sim draws its cameras with {drawn!r}, but this checkpoint was trained on "
                                   f"images drawn with {self.trained_renderer!r}: they light the scene differently "
                                   f"(launch with renderer:=auto or renderer:={self.trained_renderer})",
                                   throttle_duration_sec=60.0)
        self.begin(start_s, str(info.get("task", "")))

    def on_run(self, message: String) -> None:
        if not message.data:
            with self._lock:
                self.episode_start_s = None
            self.get_logger().info("run ended: answering nothing until the next one")
            return
        self.begin(self.get_clock().now().nanoseconds * 1e-9, message.data)

    def begin(self, start_s: float, task: str) -> None:
        """A run (an episode) from `start_s`: the policy's queue and the matcher start empty."""
        with self._lock:
            self.episode_start_s, self.task = start_s, task
            self.matcher.clear()
            self.answer = None
            self.answered_s = self.episode_start_s - 1.0 / self.fps
            self._reset_policy = True  # on the inference thread, before its next answer
        self._wake.set()
        self.get_logger().info(f"episode from t={start_s:.3f} s: {task or '(no task text)'}")

    def destroy_node(self) -> None:
        self._stopping = True
        self._ready.set()
        self._wake.set()
        self._thread.join(timeout=10.0)
        super().destroy_node()

    def _inference(self, checkpoint: str, device: str, threads: int, loaded: Future) -> None:
        """The inference thread: load the checkpoint, then answer until the node goes.

        Every torch call of the node happens on this thread. With torch's OpenMP pool already started by
        another thread (the main thread loading the checkpoint), the same ACT forward took 1.7x as long
        here on 2 cores (44 against 26 ms): libgomp's workers for the second thread stop spinning between
        parallel regions once it manages more threads than there are cores."""
        try:
            if threads:
                import torch

                torch.set_num_threads(threads)
            loaded.set_result(self._load(checkpoint, device))
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
                self.get_logger().error(f"inference failed: {error!r}", throttle_duration_sec=2.0)

    # --- answering -------------------------------------------------------------------------------------
    def _tick(self, stamp: float) -> int:
        return round((stamp - self.episode_start_s) * self.fps)

    def _due(self, stamp: float) -> bool:
        return self.infer_mode == "latest" or self._tick(stamp) % self.replan_every == 0

    def try_answer(self) -> bool:
        """Answer the newest due observation, if there is one (on the inference thread); whether it did."""
        due = self._take_due()
        if due is None:
            return False
        stamp, parts, task, target, run = due
        try:  # with the target where the selector found it, and the request (the task's kind), one-hot
            observation = build_observation(parts["joints"], {c: parts[c] for c in self.cameras},
                                            *((target[1], requested_kind(task)) if self.wants_target else ()))
        except ValueError as error:
            self.get_logger().error(f"no chunk for t={stamp:.3f} s: the checkpoint takes the target and the "
                                    f"request, and the task {task!r} gives {error}", throttle_duration_sec=2.0)
            return False
        started = time.perf_counter()
        chunk, _ = self.policy(observation, task)
        with self._lock:
            if self.episode_start_s != run:  # the run ended or another began while it thought: not for now
                self.get_logger().info(f"dropped the chunk for t={stamp:.3f} s: its run is over")
                return False
        self._publish(so101.from_lerobot(chunk), stamp, started)
        return True

    def _take_due(self):
        """The newest due, complete observation not yet answered, as (stamp, parts, task, target, run), marked
        answered; None when there is none (or the target for this episode has not come). The policy is reset
        here, before the first answer of a run."""
        with self._lock:
            if self.episode_start_s is None:
                return None
            found = self.matcher.newest(after_s=self.answered_s, accept=self._due)
            if found is None:
                return None
            stamp, parts = found
            target = self.target
            if self.wants_target and (target is None or target[0] < self.episode_start_s - 1e-6):
                self.get_logger().warn("waiting for /target/point for this episode", throttle_duration_sec=2.0)
                return None
            reset, self._reset_policy = self._reset_policy, False
            self.answered_s = stamp
            due = (stamp, parts, self.task, target, self.episode_start_s)
        if reset:
            self.policy.reset()
        return due

    def _publish(self, chunk_rad: np.ndarray, stamp: float, started: float) -> None:
        """The chunk (chunk_size, 6) radians out, answering the observation of `stamp`, with its latency and path."""
        data = serialized_chunk(chunk_rad, stamp, self.fps, self.joint_names)
        with self._lock:
            self.answer = (stamp, data)
        self.chunk_pub.publish(data)
        latency = time.perf_counter() - started
        self.latency_pub.publish(Float64(data=latency))
        self.path.publish(chunk_rad, stamp)
        self.get_logger().info(f"chunk for t={stamp:.3f} s (tick {self._tick(stamp)}): {latency * 1000:.0f} ms",
                               throttle_duration_sec=5.0)


def main(args: list[str] | None = None) -> None:
    run(PolicyNode, "act_policy_node", args)


if __name__ == "__main__":
    main()
