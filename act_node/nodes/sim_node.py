"""Sim node: the table-top on ROS 2 topics, executing incoming action chunks. A thin adapter over
act_node.stepping.SimEpisodes (the clock, the executor, episodes) and act_node.nodes.messages.

Publishes each camera's Image and CameraInfo, /joint_states, /clock, /scene/objects, /episode/start
(a Header: stamp = the episode's first tick, frame_id = JSON with episode, seed and task) and
/episode/result (JSON). Executes /act/action_chunk; hears /target/point only to report how far the
target the policy was given lay from the truth (with `target_source:=truth` it publishes the true
target on /target/point itself, and the graph has no selector).

Clocks: `lockstep` steps when the action for this tick is in: a chunk's arrival triggers the stepping,
nothing polls; while it waits, the observation goes out again every `republish_s` (a late joiner may have
missed it). Before the first chunk (the policy loads its checkpoint) it holds one tick each `lockstep_timeout_s`
of wall time; after it, `lockstep_timeout_s` without an action (a policy that died, say) it says so once and holds
the arm, stepping at fps, until actions come again (a respawned policy hears the latched episode start and
target and answers the re-sent observations): never a hang. Such an episode counts as failed, with the
reason in its result's `interrupted`. `realtime` steps on a
wall-clock timer at fps. Episodes start on ~/reset (next seed), on /target/request (a kind), or by
themselves (`autostart`), and end on success or the step limit; after the last, the node's `done` future
completes and the process exits with 0.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64, Header, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from act_node.chunks import MERGE_RULES, hold_chunk
from act_node.config import GraphConfig
from act_node.description import robot_description
from act_node.episodes import EpisodeResult
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.graph import SIM_PARAMETERS
from act_node.nodes.messages import (
    COMMANDS,
    LATCHED,
    RELIABLE,
    SENSOR,
    TARGETS,
    MessageError,
    camera_info,
    chunk_actions,
    episode_start_message,
    joint_state_message,
    parsed,
    point_message,
    scene_markers,
    serialized_image,
    stamped_joint_positions,
    target_point,
    to_time,
)
from act_node.nodes.parameters import declare_node, refuse, result
from act_node.nodes.runner import run
from act_node.stepping import CameraSchedule, RealtimeClock, SimEpisodes, VideoWriter, result_path
from act_node.tabletop.objects import KINDS
from act_node.tabletop.outcomes import MODE_TITLES
from act_node.tabletop.video import Shot

# what `ros2 param set` changes while the sim runs: the executor reads these at every tick
CHANGEABLE = ("merge", "ensemble_coeff", "max_velocity", "stale_after_s")
SLOW_REALTIME = 0.9  # clock:=realtime stepping slower than this share of the wall clock is a warning


@dataclass
class SimCounts:
    """What the sim node counts over its life, for /diagnostics."""

    chunks_received: int = 0
    chunks_rejected: int = 0
    late_chunks: int = 0  # chunks whose first steps were already past when they arrived
    late_steps: int = 0
    earlier_episode_chunks: int = 0  # answers to an earlier episode's observation, come after it ended: not queued
    holds: Counter = field(default_factory=Counter)  # held ticks by reason
    clamped_ticks: int = 0  # of the finished episodes (the running one: SimEpisodes.clamped_ticks)
    episodes_done: int = 0
    successes: int = 0
    lockstep_timeouts: int = 0  # ticks held because no action came within lockstep_timeout_s


def film_outcome(result: EpisodeResult) -> str:
    """The line under an episode film's last frame: the task and how it ended."""
    ended = "succeeded" if result.success else "failed"
    why = f": {MODE_TITLES.get(result.outcome, result.outcome)}," if result.outcome and not result.success else ""
    return f"episode {result.episode} (seed {result.seed}): {result.task}  {ended}{why} after {result.steps} steps"


class SimNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_sim", **node_options)  # e.g. parameter_overrides, for tests
        def computed(values: dict) -> dict:  # stale_after_s and ensemble_coeff: the config's (act_node.settings)
            if values["command_source"] == "leader" and values["clock"] != "realtime":
                raise ValueError("command_source:=leader needs clock:=realtime: a person on a leader arm moves in "
                                 "real time, and a lockstep sim would wait for chunks that never come")
            replan = int(values["replan_every"]) or None
            self.config = GraphConfig(**{name: values[name] for name in SIM_PARAMETERS if name != "replan_every"},
                                      **({"replan_every": replan} if replan else {}))
            return {"stale_after_s": self.config.stale_after_s(), "ensemble_coeff": self.config.chunk_merge()[1]}

        values = declare_node(self, "act_sim", computed)
        self.command_source = values["command_source"]
        self.lockstep_timeout_s = self.config.lockstep_timeout_s
        self.republish_s = float(values["republish_s"])
        self.sim = SimEpisodes(self.config)
        if not math.isfinite(values["ensemble_coeff"]):
            raise ValueError(f"parameter ensemble_coeff must be finite, got {values['ensemble_coeff']}")
        self.sim.executor.stale_after_s = float(values["stale_after_s"])
        self.sim.executor.ensemble_coeff = float(values["ensemble_coeff"])
        self.add_on_set_parameters_callback(self.check_change)
        self.add_post_set_parameters_callback(self.apply_change)
        self.cameras = list(self.sim.table.rig.specs.values())
        self.video_dir = Path(self.config.video_dir) if self.config.video_dir else None
        self.filming = self.video_dir is not None and self.config.record_video
        self.videos = VideoWriter(self.config.fps, self._video_written) if self.filming else None
        self.frames: list = []
        self.camera_schedule = CameraSchedule(self.config, self.sim.replan_every, self.filming)
        self.done = Future()  # completes after the last episode: the runner then ends the process
        self.log = self.get_logger()
        if self.cameras:
            drawn = self.sim.table.world.client.name
            self.log.info(f"cameras {[c.name for c in self.cameras]} drawn with {drawn} "
                          f"(renderer:={self.get_parameter('renderer').value})")
        self.image_pubs = {c.name: self.create_publisher(Image, f"camera/{c.name}/image_raw", SENSOR)
                           for c in self.cameras}
        self.info_pubs = {c.name: self.create_publisher(CameraInfo, f"camera/{c.name}/camera_info", SENSOR)
                          for c in self.cameras}
        self.joint_pub = self.create_publisher(JointState, "joint_states", SENSOR)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        self.scene_pub = self.create_publisher(MarkerArray, "scene/objects", LATCHED)
        self.start_pub = self.create_publisher(Header, "episode/start", LATCHED)
        self.result_pub = self.create_publisher(String, "episode/result", RELIABLE)
        # the command applied each tick, after the executor's limits, stamped with the tick: what a recorder
        # takes as the action, whatever its source (a chunk, a leader arm, a hold)
        self.command_pub = self.create_publisher(JointState, "act/joint_command", COMMANDS)
        # the URDF with the table and camera frames, latched as robot_state_publisher does: RViz's robot model
        self.description_pub = self.create_publisher(String, "robot_description", LATCHED)
        self.description_pub.publish(String(data=robot_description()))
        if self.command_source == "leader":
            self.create_subscription(JointState, "leader/joint_states", parsed(
                self, stamped_joint_positions, "leader joint state", self.on_leader, 2.0), SENSOR)
        else:
            self.chunk_topic = self.create_subscription(
                JointTrajectory, "act/action_chunk", self.on_chunk, RELIABLE,
                raw=True).topic_name  # raw: read by chunk_actions without rclpy building the message
            # the policy node's own time for each chunk: the episode's mean_inference_s (the expert says none)
            self.create_subscription(Float64, "act/inference_latency", self.on_inference, RELIABLE)
        self.create_subscription(String, "target/request", self.on_request, RELIABLE)
        if self.config.target_source == "truth":  # no selector in the graph: the sim says where the target is
            self.point_pub = self.create_publisher(PointStamped, "target/point", TARGETS)
        else:
            self.create_subscription(PointStamped, "target/point", self.on_target, LATCHED)
        self.create_service(Trigger, "~/reset", self.on_reset)
        if self.config.clock == "realtime":
            self.timer = self.create_timer(1.0 / self.config.fps, self.step_once)
        else:  # lockstep: a chunk triggers the stepping; this slow timer only re-sends and times out
            self.timer = self.create_timer(self.republish_s, self.on_waiting)
            self.stepper = self.create_guard_condition(self.step_while_ready)
        self.waiting_since = time.monotonic()
        self.stalled: tuple[float, int] | None = None  # lockstep with no action: (since, ticks held since)
        self.heard_driver = False  # a chunk came since the node started (before: the policy is still loading)
        self.chunk_sequence = 0  # the last chunk's publication sequence number (a new publisher starts at 1)
        self.driver_restarts = 0
        self.episode_restart = 0  # the episode in which the driver restarted (0: none)
        self.episode_stalled = 0  # ticks of this episode held that way
        self.realtime = RealtimeClock(self.config.fps)
        self.closed = False
        self.counts = SimCounts()
        self._factor_window = (time.monotonic(), self.sim.tick)  # wall time and tick of the last report
        self.diagnostics = Diagnostics(self, "table-top sim", self.fill_diagnostics)
        self.lock = threading.Lock()  # callbacks vs destroy_node on another thread: never step a closed world
        self.await_subscriber = values["await_subscriber"]
        self.awaited = [name.strip() for name in self.await_subscriber.split(",") if name.strip()]
        # a person on a leader arm: the first episode starts once the leader is heard, not while its node starts
        self.leader_heard = self.command_source != "leader"
        self.await_driver = bool(values["await_driver"]) and self.command_source == "policy"
        if values["autostart"] and (self.awaited or not self.leader_heard or self.await_driver):
            waits = [f"{', '.join(self.awaited)} on act/joint_command, joint_states and the cameras"] if self.awaited \
                else []
            waits += [] if self.leader_heard else ["the leader arm on leader/joint_states"]
            waits += ["a driver (the policy, the expert) on act/action_chunk"] if self.await_driver else []
            self.log.info(f"waiting for {' and '.join(waits)} before the first episode")
            self.awaiting = self.create_timer(0.1, self.start_when_ready)
        elif values["autostart"]:
            self.start_episode()

    def start_when_ready(self) -> None:
        """The first episode, once the awaited nodes subscribe and (command_source:=leader) the leader is heard."""
        if not self.leader_heard:
            return
        if self.await_driver and not self.count_publishers(self.chunk_topic):
            return
        # every stream the recorder takes: a camera it has not matched yet would lose the first ticks' images.
        # The graph names a node's subscription before this publisher has matched it (seen under load: the recorder
        # listed, a lockstep episode of 0.4 s published into nothing, "no complete frame"), so the publisher must
        # also count as many matched subscriptions as the awaited nodes hold on its topic
        for publisher in (self.command_pub, self.joint_pub, *self.image_pubs.values()):
            infos = self.get_subscriptions_info_by_topic(publisher.topic_name)
            awaited = [info for info in infos if info.node_name in self.awaited]
            if not set(self.awaited) <= {info.node_name for info in awaited}:
                return
            if publisher.get_subscription_count() < len(awaited):
                return
        self.destroy_timer(self.awaiting)
        with self.lock:
            if not self.closed:
                self.start_episode()

    def work_left(self) -> str | None:
        """What a stop now cuts short, for the runner (a line on stderr; the exit code stays 0), or None: a count
        of episodes, or nothing when it serves until stopped (episodes:=0)."""
        left = self.sim.episodes_left
        if left is None or left <= 0:
            return None
        return f"{left} of {self.config.episodes} episodes not finished"

    # --- parameters that change at run time --------------------------------------------------------------
    def check_change(self, parameters) -> object:
        # auto is resolved once, at start, from the checkpoint (GraphConfig.chunk_merge): a running sim takes a rule
        problems = [refuse(p.name, p.value, MERGE_RULES if p.name == "merge" else None) for p in parameters]
        problems += [f"parameter ensemble_coeff must be finite, got {p.value}" for p in parameters
                     if p.name == "ensemble_coeff" and not math.isfinite(p.value)]
        return result([p for p in problems if p])

    def apply_change(self, parameters) -> None:
        executor = self.sim.executor
        with self.lock:  # between ticks
            for parameter in parameters:
                if parameter.name == "merge":
                    executor.merge = parameter.value
                elif parameter.name == "ensemble_coeff":
                    executor.ensemble_coeff = float(parameter.value)
                elif parameter.name == "max_velocity":
                    executor.max_velocity[:] = float(parameter.value)
                elif parameter.name == "stale_after_s":
                    executor.stale_after_s = float(parameter.value)
                else:
                    continue
                self.get_logger().info(f"{parameter.name} is now {parameter.value}")

    # --- episodes ----------------------------------------------------------------------------------------
    def start_episode(self, request: str | None = None) -> dict:
        start = self.sim.start_episode(request)
        self.frames = []
        self.stalled, self.episode_stalled = None, 0  # a new episode waits lockstep_timeout_s again
        self.episode_restart = 0
        self.start_pub.publish(episode_start_message(start.stamp_s, start.info()))
        objects = [(o.kind, o.position[0], o.position[1], o.yaw, o.height_m, o.footprint_m) for o in start.objects]
        self.scene_pub.publish(scene_markers(objects, start.stamp_s, start.episode))
        if self.config.target_source == "truth":
            truth = self.sim.table.task.scene.target.xy
            self.sim.target_given(start.stamp_s, truth)
            self.point_pub.publish(point_message(truth, start.stamp_s))
        self.publish_observation()
        self.log.info(f"episode {start.episode} (seed {start.seed}): {start.task}")
        return start.info()

    def end_episode(self, result: EpisodeResult) -> None:
        reasons = []
        if self.episode_stalled:
            reasons.append(f"held {self.episode_stalled} ticks with no action (none within lockstep_timeout_s "
                           f"{self.lockstep_timeout_s:g} s: a node died or stalled)")
        if self.episode_restart == result.episode:
            reasons.append("the policy restarted during the episode (its chunks came from a new publisher)")
        if reasons:  # what the policy did not drive as one run is not its success
            result = replace(result, success=False, interrupted="; ".join(reasons))
        self.counts.episodes_done += 1
        self.counts.successes += bool(result.success)
        self.counts.clamped_ticks += result.clamped_ticks
        self.result_pub.publish(String(data=result.to_json()))
        error = result.target_error_m
        target = "no target point" if error is None else f"target {error * 100:.1f} cm off"
        self.log.info(f"episode {result.episode} {'succeeded' if result.success else 'failed'} after {result.steps} "
                      f"steps (reward {result.sum_reward:.2f}, held {result.held_ticks} ticks, clamped "
                      f"{result.clamped_ticks} ticks, {target})")
        if self.video_dir is not None:
            path = result_path(self.video_dir, result)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(result.to_json() + "\n")
            if self.videos is not None:
                self.videos.submit(self.frames, path.with_suffix(".mp4"), film_outcome(result))
        self.frames = []
        if self.sim.finished:
            self.log.info("all episodes done")
            # a recorder must have the last result before the graph is stopped (reliable: acknowledged)
            self.result_pub.wait_for_all_acked(Duration(seconds=1.0))
            self.done.set_result(0)
        else:
            self.start_episode()

    def _video_written(self, path: Path, error: Exception | None) -> None:
        if error is None:
            self.log.info(f"video: {path}")
        else:
            self.log.error(f"could not write the video {path}: {error}")

    def on_reset(self, _request, response):
        with self.lock:
            if self.closed:
                response.success, response.message = False, "the sim node is shutting down"
            else:
                response.success, response.message = True, str(self.start_episode())
        return response

    def on_request(self, message: String) -> None:
        kind = message.data.strip()
        if kind not in KINDS:
            self.log.error(f"ignored request {kind!r}: unknown object kind (expected one of {list(KINDS)})")
            return
        with self.lock:
            if not self.closed:
                self.start_episode(request=kind)

    def on_target(self, message: PointStamped) -> None:
        try:
            stamp_s, xy = target_point(message)
        except MessageError as error:
            self.log.error(f"ignored target point: {error}")
            return
        self.sim.target_given(stamp_s, xy)

    # --- chunks ------------------------------------------------------------------------------------------
    def on_leader(self, leader: tuple[float, object]) -> None:
        """A leader arm's pose: followed from this tick for LEADER_HOLD_S, through the executor's limits."""
        self.leader_heard = True
        with self.lock:
            if self.closed or not self.sim.running:
                return
            self.sim.add_chunk(self.sim.now_s, hold_chunk(leader[1], self.sim.now_s, self.config.fps).actions)

    def on_chunk(self, message: bytes, info: dict) -> None:
        self.counts.chunks_received += 1
        self.heard_driver = True
        sequence = (info or {}).get("publication_sequence_number") or 0
        if sequence and self.chunk_sequence and sequence <= self.chunk_sequence:
            # a publisher's numbers only grow: this is another one, the driver started again (respawned)
            self.driver_restarts += 1
            with self.lock:
                if self.sim.running and not self.episode_restart:
                    self.episode_restart = self.sim.episode
                    self.log.warn(f"the chunks come from a new publisher (sequence {self.chunk_sequence} then "
                                  f"{sequence}): the policy restarted; episode {self.sim.episode} counts as failed")
        self.chunk_sequence = sequence or self.chunk_sequence
        try:
            stamp_s, actions = chunk_actions(message, self.config.fps)
            with self.lock:  # between ticks, and not across an episode's start
                dropped = self.sim.policy_chunk(stamp_s, actions)
        except (MessageError, ValueError) as error:
            self.counts.chunks_rejected += 1
            self.log.error(f"dropped chunk: {error}", throttle_duration_sec=2.0)
            return
        if dropped is None:
            self.counts.earlier_episode_chunks += 1
            self.log.debug(f"chunk for t={stamp_s:.3f} s answers an earlier episode: not queued")
            return
        if dropped:
            self.counts.late_chunks += 1
            self.counts.late_steps += dropped
        self.camera_schedule.chunk_arrived(self.sim.tick)
        if dropped:
            self.log.debug(f"chunk for t={stamp_s:.3f} s arrived at t={self.sim.now_s:.3f} s: {dropped} steps past")
        if self.config.clock == "lockstep" and self.sim.ready():
            self.stepper.trigger()

    def on_inference(self, message: Float64) -> None:
        with self.lock:
            self.sim.policy_inference(message.data)

    # --- stepping ----------------------------------------------------------------------------------------
    def step_while_ready(self) -> None:
        """Lockstep: one tick per trigger, re-triggered while the queue holds the next tick's action, so
        other callbacks (chunks, services) run between ticks."""
        with self.lock:
            if self.closed or not self.sim.ready():
                return
            if self.stalled is not None:
                self.log.info(f"actions again at t={self.sim.now_s:.3f} s after {self.stalled[1]} held ticks")
                self.stalled = None
            self._step()
            if self.sim.ready():
                self.stepper.trigger()

    def on_waiting(self) -> None:
        """Lockstep, every `republish_s` of wall time: say the observation again while waiting; after the
        timeout, hold for a tick."""
        with self.lock:
            if self.closed or not self.sim.running:
                return
            if self.sim.ready():  # the next action is in (a chunk held for a later tick, say): lockstep steps it
                self.stepper.trigger()
                return
            now = time.monotonic()
            if self.stalled is None:
                waited = now - self.waiting_since
                if waited < self.lockstep_timeout_s:
                    self.publish_observation(record=False)
                    return
                if not self.heard_driver:  # no chunk yet: a policy loading its checkpoint on a busy machine
                    self.log.warn(f"no chunk yet for t={self.sim.now_s:.3f} s after {waited:.1f} s: holding a tick "
                                  "each lockstep_timeout_s until the policy (or the expert) answers",
                                  throttle_duration_sec=10.0)
                    self.counts.lockstep_timeouts += 1
                    self._step()
                    return
                self.stalled = (now, 0)
                self.log.warn(f"no action for t={self.sim.now_s:.3f} s after {waited:.1f} s: holding the arm at "
                              f"{self.config.fps} fps until actions come again; episode {self.sim.episode} counts "
                              "as failed")
            since, held = self.stalled
            for _ in range(int((now - since) * self.config.fps) + 1 - held):  # the ticks due at fps
                if self.closed or not self.sim.running or self.sim.ready():
                    break
                self.counts.lockstep_timeouts += 1
                self.episode_stalled += 1
                held += 1
                self.stalled = (since, held)
                self._step()
            if self.sim.running and self.sim.ready():  # a chunk that came for a later tick is due now
                self.stepper.trigger()

    def step_once(self) -> None:
        """Realtime: the ticks the wall clock says are due (stepping.RealtimeClock), normally one per timer call."""
        with self.lock:
            for _ in range(self.realtime.due(time.monotonic(), self.sim.running)):
                self._step()

    def _step(self) -> None:
        if self.closed or not self.sim.running:
            return
        tick = self.sim.step()
        self.command_pub.publish(joint_state_message(tick.command, np.zeros_like(tick.command), tick.stamp_s))
        self.waiting_since = time.monotonic()
        if tick.held:
            self.counts.holds[tick.reason] += 1
            self.log.debug(f"hold at t={self.sim.now_s:.3f} s: {tick.reason}")
        self.publish_observation()
        if tick.done:
            self.end_episode(tick.result)

    def fill_diagnostics(self, report: Report) -> None:
        """Once a second: chunks, late chunks, holds, clamps, episodes, and sim seconds per wall second."""
        counts, sim, now = self.counts, self.sim, time.monotonic()
        started, tick = self._factor_window
        self._factor_window = (now, sim.tick)
        factor = (sim.tick - tick) / self.config.fps / max(now - started, 1e-6)
        recent = self.diagnostics.recent
        timeouts, rejected = recent("timeouts", counts.lockstep_timeouts), recent("rejected", counts.chunks_rejected)
        stale = recent("stale", counts.holds["chunk stale"])
        if timeouts:
            report.warn(f"held {timeouts:g} ticks recently: no action within {self.lockstep_timeout_s:g} s")
        if rejected:
            report.warn(f"rejected {rejected:g} chunks recently")
        if stale:
            report.warn(f"held {stale:g} ticks recently on a stale chunk")
        if self.config.clock == "realtime" and sim.running and factor < SLOW_REALTIME:
            report.warn(f"realtime factor {factor:.2f}: the sim falls behind the wall clock")
        report.update({
            "clock": self.config.clock, "running": sim.running,
            "episode": sim.start.episode if sim.running else "none", "tick": sim.tick,
            "realtime_factor": factor, "episodes_done": counts.episodes_done, "successes": counts.successes,
            "episodes_left": "until stopped" if sim.episodes_left is None else sim.episodes_left,
            "chunks_received": counts.chunks_received, "chunks_rejected": counts.chunks_rejected,
            "late_chunks": counts.late_chunks, "late_steps": counts.late_steps,
            "earlier_episode_chunks": counts.earlier_episode_chunks,
            "held_ticks": sum(counts.holds.values()), "holds": counts.holds,
            "clamped_ticks": counts.clamped_ticks + (sim.clamped_ticks if sim.running else 0),
            "lockstep_timeouts": counts.lockstep_timeouts, "driver_restarts": self.driver_restarts,
        })

    def publish_observation(self, record: bool = True) -> None:
        stamp = self.sim.now_s
        self.clock_pub.publish(Clock(clock=to_time(stamp)))
        due = self.camera_schedule.due(self.sim.tick, self.sim.start_tick, self.sim.start, list(self.image_pubs),
                                       lambda camera: self.image_pubs[camera].get_subscription_count() > 0)
        images = self.sim.images(due) if due else {}
        for camera in self.cameras:
            if camera.name not in images:
                continue
            frame = f"{camera.name}_optical"
            # as bytes: rclpy does not convert the pixels (bench/bench_transport.py, 'profile, raw')
            self.image_pubs[camera.name].publish(serialized_image(images[camera.name], stamp, frame))
            self.info_pubs[camera.name].publish(camera_info(camera.intrinsics(), camera.height, camera.width,
                                                            stamp, frame))
        positions, velocities = self.sim.joint_state()
        self.joint_pub.publish(joint_state_message(positions, velocities, stamp))
        if record and self.filming:
            start = self.sim.start
            self.frames.append(Shot(images, f"episode {start.episode}: {start.task}  t {stamp:.2f} s"))

    def destroy_node(self) -> None:
        with self.lock:  # a callback on another thread finishes its tick first
            self.closed = True
            self.destroy_timer(self.timer)
            self.diagnostics.final()  # the totals (chunks received, holds) before the sim goes
            self.sim.close()
        if self.videos is not None:
            self.videos.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(SimNode, "act_sim_node", args)


if __name__ == "__main__":
    main()
