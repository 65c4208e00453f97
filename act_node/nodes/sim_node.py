"""Sim node: the table-top env on ROS 2 topics, executing incoming action chunks through act_node.chunks.

Publishes each camera's Image and CameraInfo, /joint_states, /clock, /scene/objects, /episode/start
(a Header: stamp = the episode's first tick, frame_id = JSON with episode, seed and task) and
/episode/result (JSON). Executes /act/action_chunk with latency alignment, the chosen merge rule,
joint-range and velocity clamps, and a hold when the newest chunk is stale.

Clocks: `lockstep` steps only when the queue holds this tick's action (and, every `replan_every`
ticks, only once the chunk answering this very tick is in): deterministic, whatever the policy's
speed; after `lockstep_timeout_s` of wall time without one it holds position and says so. `realtime`
steps on a wall-clock timer at fps and holds when nothing usable is queued.
Episodes start on the ~/reset service (next seed), on /target/request (a kind), or by themselves
(`autostart`), and end on success or the step limit.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from act_node import so101
from act_node.chunks import Chunk, ChunkExecutor
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    MessageError,
    camera_info,
    chunk_actions,
    episode_start_message,
    image_message,
    joint_state_message,
    scene_markers,
    to_time,
)
from act_node.nodes.runner import run
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.objects import KINDS
from act_node.tabletop.video import caption, write_video

REPUBLISH_S = 0.5  # lockstep: while waiting, the current observation goes out again this often (wall time)


class SimNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_sim", **node_options)  # e.g. parameter_overrides, for tests
        self.declare_parameter("objects", 4)
        self.declare_parameter("cameras", ["front", "wrist"])
        self.declare_parameter("image_height", 120)
        self.declare_parameter("image_width", 160)
        self.declare_parameter("fps", 30)
        self.declare_parameter("clock", "lockstep")  # or "realtime"
        self.declare_parameter("merge", "replace")  # replace, average, ensemble
        self.declare_parameter("stale_after_s", 1.0)
        self.declare_parameter("replan_every", 30)
        self.declare_parameter("lockstep_timeout_s", 10.0)
        self.declare_parameter("max_velocity_rad_s", float(so101.MAX_VELOCITY_RAD_S))
        self.declare_parameter("max_steps", 300)
        self.declare_parameter("target_source", "selector")
        self.declare_parameter("first_seed", 0)
        self.declare_parameter("episodes", 0)  # stop after this many (0: keep serving)
        self.declare_parameter("autostart", True)
        self.declare_parameter("video_dir", "")  # each episode's result (JSON) and video go here
        self.declare_parameter("record_video", True)
        get = lambda name: self.get_parameter(name).value  # noqa: E731
        self.clock_mode = get("clock")
        if self.clock_mode not in ("lockstep", "realtime"):
            raise ValueError(f"clock must be 'lockstep' or 'realtime', got {self.clock_mode!r}")
        self.fps = int(get("fps"))
        self.env = PickObjectEnv(objects=int(get("objects")), cameras=tuple(get("cameras")),
                                 image_size=(int(get("image_height")), int(get("image_width"))), fps=self.fps,
                                 max_steps=int(get("max_steps")), target_source=get("target_source"))
        self.executor_ = ChunkExecutor(self.fps, so101.LOWER_RAD, so101.UPPER_RAD, float(get("max_velocity_rad_s")),
                                       merge=get("merge"), stale_after_s=float(get("stale_after_s")))
        self.replan_every = int(get("replan_every"))
        self.lockstep_timeout_s = float(get("lockstep_timeout_s"))
        self.next_seed = int(get("first_seed"))
        self.episodes_left = int(get("episodes")) or None
        self.video_dir = Path(get("video_dir")) if get("video_dir") else None
        self.record_video = bool(get("record_video"))
        self.tick = 0  # sim time = tick / fps, monotonic across episodes
        self.episode = 0
        self.running = False
        self.closed = False
        self.env_lock = threading.Lock()  # callbacks vs destroy_node: no step on a closed env
        self.frames: list[np.ndarray] = []
        self.image_pubs = {c.name: self.create_publisher(Image, f"/camera/{c.name}/image_raw", SENSOR)
                           for c in self.env.cameras}
        self.info_pubs = {c.name: self.create_publisher(CameraInfo, f"/camera/{c.name}/camera_info",
                                                        SENSOR) for c in self.env.cameras}
        self.joint_pub = self.create_publisher(JointState, "/joint_states", SENSOR)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        self.scene_pub = self.create_publisher(MarkerArray, "/scene/objects", LATCHED)
        self.start_pub = self.create_publisher(Header, "/episode/start", LATCHED)
        self.result_pub = self.create_publisher(String, "/episode/result", RELIABLE)
        self.create_subscription(JointTrajectory, "/act/action_chunk", self.on_chunk, RELIABLE)
        self.create_subscription(String, "/target/request", self.on_request, RELIABLE)
        self.create_service(Trigger, "~/reset", self.on_reset)
        period = 1.0 / self.fps if self.clock_mode == "realtime" else 0.001
        self.timer = self.create_timer(period, self.on_timer)
        self.waiting_since: float | None = None
        self.held_ticks = 0
        self.log = self.get_logger()
        if get("autostart"):
            self.start_episode()

    @property
    def now_s(self) -> float:
        return self.tick / self.fps

    # --- episodes ----------------------------------------------------------------------------------------
    def start_episode(self, request: str | None = None) -> dict:
        seed = self.next_seed
        self.next_seed += 1
        self.episode += 1
        self.tick += 1  # a fresh tick: nothing of the last episode's chunks applies
        observation, info = self.env.reset(seed=seed, options={"request": request} if request else None)
        self.executor_.reset(self.env.world.joint_positions())
        self.running, self.sum_reward, self.held_ticks, self.frames = True, 0.0, 0, []
        self.start_tick = self.tick
        self.episode_info = {"episode": self.episode, "seed": seed, "task": self.env.task}
        self.start_pub.publish(episode_start_message(self.now_s, self.episode_info))
        poses = [(o, *self.env.world.object_pose(o)) for o in self.env.scene.objects]  # (object, xyz, yaw)
        objects = [(o.kind.name, xyz[0], xyz[1], yaw, o.kind.height_m, o.kind.footprint_m) for o, xyz, yaw in poses]
        self.scene_pub.publish(scene_markers(objects, self.now_s, self.episode))
        self.publish_observation(observation)
        self.log.info(f"episode {self.episode} (seed {seed}): {self.env.task}")
        return self.episode_info

    def end_episode(self, info: dict) -> None:
        self.running = False
        result = {**self.episode_info, "success": bool(info["is_success"]), "steps": info["steps"],
                  "sum_reward": self.sum_reward, "held_ticks": self.held_ticks,
                  "clipped_total": info["clipped_total"]}
        self.result_pub.publish(String(data=json.dumps(result)))
        self.log.info(f"episode {self.episode} {'succeeded' if result['success'] else 'failed'} after "
                      f"{info['steps']} steps (reward {self.sum_reward:.2f}, held {self.held_ticks} ticks)")
        if self.video_dir is not None:
            stem = self.video_dir / f"episode{self.episode}_seed{self.episode_info['seed']}"
            self.video_dir.mkdir(parents=True, exist_ok=True)
            stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
            if self.record_video and self.frames:
                path = write_video(self.frames + [self.frames[-1]] * self.fps, stem.with_suffix(".mp4"), self.fps)
                self.log.info(f"video: {path}")
        if self.episodes_left is not None:
            self.episodes_left -= 1
            if self.episodes_left <= 0:
                self.log.info("all episodes done")
                raise SystemExit(0)
        self.start_episode()

    def on_reset(self, _request, response):
        with self.env_lock:
            if self.closed:
                response.success, response.message = False, "the sim node is shutting down"
            else:
                response.success, response.message = True, json.dumps(self.start_episode())
        return response

    def on_request(self, message: String) -> None:
        kind = message.data.strip()
        if kind not in KINDS:
            self.log.error(f"ignored request {kind!r}: unknown object kind (expected one of {list(KINDS)})")
            return
        with self.env_lock:
            if not self.closed:
                self.start_episode(request=kind)

    # --- chunks ------------------------------------------------------------------------------------------
    def on_chunk(self, message: JointTrajectory) -> None:
        try:
            stamp_s, actions = chunk_actions(message, self.fps)
            dropped = self.executor_.add(Chunk(stamp_s, actions), self.now_s)
        except (MessageError, ValueError) as error:
            self.log.error(f"dropped chunk: {error}", throttle_duration_sec=2.0)
            return
        if dropped:
            self.log.debug(f"chunk for t={stamp_s:.3f} s arrived at t={self.now_s:.3f} s: {dropped} steps past")

    # --- stepping ----------------------------------------------------------------------------------------
    def ready(self) -> bool:
        """Lockstep: this tick's action is queued, and at a replan tick it comes from the answering chunk."""
        if not self.executor_.has_step(self.now_s):
            return False
        due = self.replan_every and (self.tick - self.start_tick) % self.replan_every == 0
        return not due or self.executor_.newest_stamp_s >= self.now_s - 0.5 / self.fps

    def on_timer(self) -> None:
        with self.env_lock:
            if not self.closed:
                self.tick_once()

    def tick_once(self) -> None:
        self.clock_pub.publish(Clock(clock=to_time(self.now_s)))
        if not self.running:
            return
        if self.clock_mode == "lockstep" and not self.ready():
            now = time.monotonic()
            self.waiting_since = self.waiting_since or now
            if now - self.last_published > REPUBLISH_S:  # a late joiner may have missed it: say it again
                self.publish_observation(self.last_observation, record=False)
            if now - self.waiting_since < self.lockstep_timeout_s:
                return
            self.log.warn(f"no action for t={self.now_s:.3f} s after {self.lockstep_timeout_s:.1f} s: holding",
                          throttle_duration_sec=5.0)
        self.waiting_since = None
        command = self.executor_.next_command(self.now_s, self.env.world.joint_positions())
        if command.held:
            self.held_ticks += 1
            self.log.debug(f"hold at t={self.now_s:.3f} s: {command.reason}")
        observation, reward, terminated, truncated, info = self.env.step(so101.to_lerobot(command.positions))
        self.sum_reward += reward
        self.tick += 1
        self.publish_observation(observation)
        if terminated or truncated:
            self.end_episode(info)

    def destroy_node(self) -> None:
        # An executor in another thread may be inside a callback right now: wait for it, then close.
        with self.env_lock:
            self.closed = True
            self.destroy_timer(self.timer)
            self.env.close()
        super().destroy_node()

    def publish_observation(self, observation: dict, record: bool = True) -> None:
        stamp = self.now_s
        self.last_observation, self.last_published = observation, time.monotonic()
        for camera in self.env.cameras:
            image = observation["pixels"][camera.name]
            frame = f"{camera.name}_optical"
            self.image_pubs[camera.name].publish(image_message(image, stamp, frame))
            self.info_pubs[camera.name].publish(camera_info(camera.intrinsics(), camera.height, camera.width,
                                                            stamp, frame))
        self.joint_pub.publish(joint_state_message(self.env.world.joint_positions(),
                                                   self.env.world.joint_velocities(), stamp))
        if record and self.video_dir is not None and self.record_video:
            self.frames.append(caption(self.env.render(), f"episode {self.episode}: {self.env.task}  "
                                                          f"t {stamp:.2f} s"))


def main(args: list[str] | None = None) -> None:
    run(SimNode, "act_sim_node", args)


if __name__ == "__main__":
    main()
