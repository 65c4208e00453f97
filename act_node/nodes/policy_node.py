"""Policy node: camera images + joint states (+ the target) -> one ACT action chunk per answered observation.

Observations are matched by header stamps (within `skew_s`), never by arrival order. In `every_n` mode
it answers the observations `replan_every` ticks apart from the episode's start (lockstep: the sim
waits for exactly those); in `latest` mode it answers the newest complete observation whenever it is
free (realtime). Chunks go out in radians, `time_from_start` = k / fps, stamped with the observation's
stamp. Bad messages are logged and dropped; nothing is inferred from them.

Runs start on the sim's /episode/start or, on an arm, without the sim: a non-empty std_msgs/String on
/act/run starts a run with that task text from now (an empty one ends it), and `run_on_start` starts one
with the `task` parameter as the node comes up.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64, Header, String
from trajectory_msgs.msg import JointTrajectory

from act_node import so101
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    MessageError,
    chunk_message,
    episode_start,
    image_array,
    joint_positions,
    seconds_of,
    target_point,
)
from act_node.nodes.runner import run
from act_node.policy import OBS_ENV_STATE, OBS_IMAGES, ChunkPolicy, FeatureSpec

BUFFER = 60  # messages kept per topic for stamp matching


class ObservationMatcher:
    """Keeps recent messages per source and finds the newest stamp every source has within `skew_s`."""

    def __init__(self, sources: list[str], skew_s: float):
        self.skew_s = skew_s
        self.buffers: dict[str, deque[tuple[float, object]]] = {name: deque(maxlen=BUFFER) for name in sources}

    def add(self, source: str, stamp_s: float, value) -> None:
        self.buffers[source].append((stamp_s, value))

    def clear(self) -> None:
        for buffer in self.buffers.values():
            buffer.clear()

    def newest(self, after_s: float = -np.inf, accept=lambda stamp: True) -> tuple[float, dict] | None:
        """(stamp, {source: value}) for the newest stamp of the first source that every other source
        matches within the skew bound; only stamps after `after_s` that `accept` takes."""
        anchor, *others = self.buffers
        for stamp, value in sorted(self.buffers[anchor], key=lambda item: -item[0]):
            if stamp <= after_s:
                return None
            if not accept(stamp):
                continue
            match = {anchor: value}
            for source in others:
                best = min(self.buffers[source], key=lambda item: abs(item[0] - stamp), default=None)
                if best is None or abs(best[0] - stamp) > self.skew_s:
                    break
                match[source] = best[1]
            else:
                return stamp, match
        return None


class PolicyNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_policy", **node_options)  # e.g. parameter_overrides, for tests
        self.declare_parameter("checkpoint", "")
        self.declare_parameter("device", "cpu")
        self.declare_parameter("cameras", ["front", "wrist"])
        self.declare_parameter("camera_topics", [""])  # default: /camera/<name>/image_raw per camera
        self.declare_parameter("joint_names", list(so101.JOINT_NAMES))
        self.declare_parameter("fps", 30.0)
        self.declare_parameter("skew_s", 0.01)
        self.declare_parameter("infer", "every_n")  # or "latest"
        self.declare_parameter("replan_every", 0)  # ticks; 0: the checkpoint's n_action_steps
        self.declare_parameter("use_target", True)
        self.declare_parameter("task", "")  # the run's task text when run_on_start
        self.declare_parameter("run_on_start", False)  # an arm without the sim: run from the start
        get = self.get_parameter
        self.cameras = list(get("cameras").value)
        topics = [t for t in get("camera_topics").value if t] or [f"/camera/{c}/image_raw" for c in self.cameras]
        if len(topics) != len(self.cameras):
            raise ValueError(f"camera_topics has {len(topics)} entries for {len(self.cameras)} cameras")
        self.joint_names = tuple(get("joint_names").value)
        self.fps = float(get("fps").value)
        self.infer_mode = get("infer").value
        if self.infer_mode not in ("every_n", "latest"):
            raise ValueError(f"infer must be 'every_n' or 'latest', got {self.infer_mode!r}")
        self.policy = self._load(get("checkpoint").value, get("device").value)
        self.replan_every = int(get("replan_every").value) or int(self.policy.config.n_action_steps)
        self.wants_target = OBS_ENV_STATE in self.policy.config.input_features and get("use_target").value
        self.image_sizes = {c: tuple(self.policy.config.input_features[f"{OBS_IMAGES}.{c}"].shape[1:])
                            for c in self.cameras}
        self.matcher = ObservationMatcher(["joints", *self.cameras], float(get("skew_s").value))
        self.target: tuple[float, np.ndarray] | None = None
        self.episode_start_s: float | None = None
        self.task = ""
        self.answered_s = -np.inf
        self.chunk_pub = self.create_publisher(JointTrajectory, "/act/action_chunk", RELIABLE)
        self.latency_pub = self.create_publisher(Float64, "/act/inference_latency", RELIABLE)
        for camera, topic in zip(self.cameras, topics):
            self.create_subscription(Image, topic, lambda m, c=camera: self.on_image(c, m), SENSOR)
        self.create_subscription(JointState, "/joint_states", self.on_joints, SENSOR)
        # latched topics: a node that starts late still gets the episode and its target
        self.create_subscription(PointStamped, "/target/point", self.on_target, LATCHED)
        self.create_subscription(Header, "/episode/start", self.on_episode, LATCHED)
        self.create_subscription(String, "/act/run", self.on_run, LATCHED)
        if get("run_on_start").value:
            self.begin(self.get_clock().now().nanoseconds * 1e-9, str(get("task").value))
        self.get_logger().info(f"policy {self.policy.path}: cameras {dict(zip(self.cameras, topics))}, "
                               f"chunk {self.policy.chunk_size}, replan every {self.replan_every} ticks, "
                               f"infer {self.infer_mode}, target {'yes' if self.wants_target else 'no'}")

    def _load(self, checkpoint: str, device: str) -> ChunkPolicy:
        if not checkpoint:
            raise ValueError("parameter 'checkpoint' is empty: give a pretrained_model folder")
        spec = FeatureSpec(cameras={c: _checkpoint_image_size(Path(checkpoint), c) for c in self.cameras},
                           state_dim=len(self.joint_names))
        return ChunkPolicy.load(checkpoint, device=device, expect=spec)

    # --- callbacks: each stores, then tries to answer ----------------------------------------------------
    def on_image(self, camera: str, message: Image) -> None:
        try:
            image = image_array(message, expected=self.image_sizes[camera])
        except MessageError as error:
            self.get_logger().error(f"dropped image from camera {camera!r}: {error}", throttle_duration_sec=2.0)
            return
        self.matcher.add(camera, seconds_of(message.header.stamp), image)
        self.try_answer()

    def on_joints(self, message: JointState) -> None:
        try:
            positions = joint_positions(message, self.joint_names)
        except MessageError as error:
            self.get_logger().error(f"dropped joint state: {error}", throttle_duration_sec=2.0)
            return
        self.matcher.add("joints", seconds_of(message.header.stamp), positions)
        self.try_answer()

    def on_target(self, message: PointStamped) -> None:
        try:
            self.target = target_point(message)
        except MessageError as error:
            self.get_logger().error(f"dropped target: {error}")
            return
        self.try_answer()

    def on_episode(self, message: Header) -> None:
        try:
            self.episode_start_s, info = episode_start(message)
        except MessageError as error:
            self.get_logger().error(f"dropped episode start: {error}")
            return
        self.begin(self.episode_start_s, str(info.get("task", "")))

    def on_run(self, message: String) -> None:
        if not message.data:
            self.episode_start_s = None
            self.get_logger().info("run ended: answering nothing until the next one")
            return
        self.begin(self.get_clock().now().nanoseconds * 1e-9, message.data)

    def begin(self, start_s: float, task: str) -> None:
        """A run (an episode) from `start_s`: the policy's queue and the matcher start empty."""
        self.episode_start_s, self.task = start_s, task
        self.policy.reset()
        self.matcher.clear()
        self.answered_s = self.episode_start_s - 1.0 / self.fps
        self.get_logger().info(f"episode from t={self.episode_start_s:.3f} s: {self.task or '(no task text)'}")

    # --- answering -------------------------------------------------------------------------------------
    def _tick(self, stamp: float) -> int:
        return round((stamp - self.episode_start_s) * self.fps)

    def _due(self, stamp: float) -> bool:
        return self.infer_mode == "latest" or self._tick(stamp) % self.replan_every == 0

    def try_answer(self) -> None:
        if self.episode_start_s is None:
            return
        found = self.matcher.newest(after_s=self.answered_s, accept=self._due)
        if found is None:
            return
        stamp, parts = found
        tick = self._tick(stamp)
        if self.wants_target and (self.target is None or self.target[0] < self.episode_start_s - 1e-6):
            self.get_logger().warn("waiting for /target/point for this episode", throttle_duration_sec=2.0)
            return
        observation = {"agent_pos": so101.to_lerobot(parts["joints"]).astype(np.float32),
                       "pixels": {c: parts[c] for c in self.cameras}}
        if self.wants_target:
            observation["environment_state"] = self.target[1].astype(np.float32)
        started = time.perf_counter()
        chunk, _ = self.policy(observation, self.task)
        self.answered_s = stamp
        self.chunk_pub.publish(chunk_message(so101.from_lerobot(chunk), stamp, self.fps, self.joint_names))
        latency = time.perf_counter() - started
        self.latency_pub.publish(Float64(data=latency))
        self.get_logger().info(f"chunk for t={stamp:.3f} s (tick {tick}): {latency * 1000:.0f} ms",
                               throttle_duration_sec=5.0)


def _checkpoint_image_size(checkpoint: Path, camera: str) -> tuple[int, int]:
    """The (H, W) the checkpoint was trained on for `camera` (from config.json, no torch), so that the
    feature check is about the camera set and state; image sizes are then checked per message."""
    try:
        features = json.loads((checkpoint / "config.json").read_text())["input_features"]
        shape = features[f"{OBS_IMAGES}.{camera}"]["shape"]
        return int(shape[1]), int(shape[2])
    except (OSError, KeyError, ValueError):
        return (0, 0)


def main(args: list[str] | None = None) -> None:
    run(PolicyNode, "act_policy_node", args)


if __name__ == "__main__":
    main()
