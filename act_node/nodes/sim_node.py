"""Sim node: the table-top on ROS 2 topics, executing incoming action chunks. ROS plumbing over
act_node.stepping.SimEpisodes (the clock, the executor, episodes), act_node.sim_schedule.SimSchedule (waiting,
holds, restarts, counts, diagnostics) and act_node.nodes.sim_topics.SimTopics (what it publishes).

Executes act/action_chunk (or, command_source:=leader, follows leader/joint_states); hears target/point only to
report how far the target the policy was given lay from the truth (with `target_source:=truth` it publishes the
true target on target/point itself, and the graph has no selector).

Clocks: `lockstep` steps when the action for this tick is in: a chunk's arrival triggers the stepping, nothing
polls; while it waits, the observation goes out again every `republish_s` (a late joiner may have missed it), and
past `lockstep_timeout_s` it holds (a respawned policy hears the latched episode start and target and answers the
re-sent observations): never a hang. `realtime` steps on a wall-clock timer at fps. Episodes start on ~/reset
(next seed), on target/request (a kind), or by themselves (`autostart`), and end on success or the step limit;
after the last, the node's `done` future completes and the process exits with 0.
"""

from __future__ import annotations

import threading
import time

from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from act_node import sim_schedule
from act_node.chunks import hold_chunk
from act_node.episodes import EpisodeResult
from act_node.nodes import messages
from act_node.nodes.diagnostics import Diagnostics
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR, MessageError
from act_node.nodes.parameters import declare_node, result
from act_node.nodes.runner import run
from act_node.nodes.sim_topics import SimTopics
from act_node.settings import SIM_GRAPH
from act_node.stepping import CameraSchedule, EpisodeFilms, RealtimeClock, SimEpisodes
from act_node.tabletop.objects import KINDS


class SimNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_sim", **node_options)  # e.g. parameter_overrides, for tests

        def computed(values: dict) -> dict:  # stale_after_s and ensemble_coeff: the config's (act_node.settings)
            self.config = sim_schedule.sim_config(values, SIM_GRAPH)
            return {"stale_after_s": self.config.stale_after_s(), "ensemble_coeff": self.config.chunk_merge()[1]}

        values = declare_node(self, "act_sim", computed)
        self.log = self.get_logger()
        self.command_source = values["command_source"]
        self.sim = SimEpisodes(self.config)
        sim_schedule.started(self.sim.executor, values)  # stale_after_s, ensemble_coeff: the launch's or computed
        self.add_on_set_parameters_callback(self.check_change)
        self.add_post_set_parameters_callback(self.apply_change)
        self.cameras = list(self.sim.table.rig.specs.values())
        self.films = EpisodeFilms(self.config, sim_schedule.video_said(self.log))
        self.camera_schedule = CameraSchedule(self.config, self.sim.replan_every, self.films.filming)
        self.done = Future()  # completes after the last episode: the runner then ends the process
        if self.cameras:
            drawn = self.sim.table.world.client.name
            self.log.info(f"cameras {[c.name for c in self.cameras]} drawn with {drawn} "
                          f"(renderer:={self.get_parameter('renderer').value})")
        self.topics = SimTopics(self, self.cameras, self.config.target_source == "truth", values["publish_truth"])
        if self.command_source == "leader":
            self.create_subscription(JointState, "leader/joint_states", messages.parsed(
                self, messages.stamped_joint_positions, "leader joint state", self.on_leader, 2.0), SENSOR)
        else:
            self.chunk_topic = self.create_subscription(
                JointTrajectory, "act/action_chunk", self.on_chunk, RELIABLE,
                raw=True).topic_name  # raw: read by chunk_actions without rclpy building the message
            # the policy node's own time for each chunk: the episode's mean_inference_s (the expert says none)
            self.create_subscription(Float64, "act/inference_latency", self.on_inference, RELIABLE)
        self.create_subscription(String, "target/request", self.on_request, RELIABLE)
        if self.config.target_source != "truth":
            self.create_subscription(PointStamped, "target/point", self.on_target, LATCHED)
        self.create_service(Trigger, "~/reset", self.on_reset)
        if self.config.clock == "realtime":
            self.timer = self.create_timer(1.0 / self.config.fps, self.step_once)
        else:  # lockstep: a chunk triggers the stepping; this slow timer only re-sends and times out
            self.timer = self.create_timer(values["republish_s"], self.on_waiting)
            self.stepper = self.create_guard_condition(self.step_while_ready)
        self.schedule = sim_schedule.SimSchedule(self.config.fps, self.config.lockstep_timeout_s, self.log)
        self.realtime = RealtimeClock(self.config.fps)
        self.closed = False
        self.diagnostics = Diagnostics(self, "table-top sim", lambda report: self.schedule.fill(
            report, self.diagnostics.recent, self.sim, self.config.clock))
        self.lock = threading.Lock()  # callbacks vs destroy_node on another thread: never step a closed world
        self.gate = sim_schedule.StartGate(values["await_subscriber"], self.command_source == "leader",
                                           values["await_driver"])
        waits = self.gate.waits()
        if values["autostart"] and waits:
            self.log.info(f"waiting for {' and '.join(waits)} before the first episode")
            self.awaiting = self.create_timer(0.1, self.start_when_ready)
        elif values["autostart"]:
            self.start_episode()

    def start_when_ready(self) -> None:
        """The first episode, once the awaited nodes subscribe and (command_source:=leader) the leader is heard."""
        # every stream the recorder takes: a camera it has not matched yet would lose the first ticks' images
        if not self.gate.ready(lambda: self.count_publishers(self.chunk_topic) > 0, lambda: (
                ([info.node_name for info in self.get_subscriptions_info_by_topic(publisher.topic_name)],
                 publisher.get_subscription_count()) for publisher in self.topics.recorded_streams())):
            return
        self.destroy_timer(self.awaiting)
        with self.lock:
            if not self.closed:
                self.start_episode()

    def work_left(self) -> str | None:
        """What a stop now cuts short, for the runner (SimEpisodes.work_left)."""
        return self.sim.work_left()

    # --- parameters that change at run time --------------------------------------------------------------
    def check_change(self, parameters) -> object:
        problems = (sim_schedule.change_problem(parameter.name, parameter.value) for parameter in parameters)
        return result([problem for problem in problems if problem])

    def apply_change(self, parameters) -> None:
        with self.lock:  # between ticks
            for parameter in parameters:
                if sim_schedule.apply_change(self.sim.executor, parameter.name, parameter.value):
                    self.log.info(f"{parameter.name} is now {parameter.value}")

    # --- episodes ----------------------------------------------------------------------------------------
    def start_episode(self, request: str | None = None) -> dict:
        start = self.sim.start_episode(request)
        self.films.started()
        self.schedule.episode_started()  # a new episode waits lockstep_timeout_s again
        truth = self.sim.table.task.scene.target.xy if self.config.target_source == "truth" else None
        if truth is not None:
            self.sim.target_given(start.stamp_s, truth)
        self.topics.episode_started(start, truth)
        self.publish_observation()
        self.log.info(f"episode {start.episode} (seed {start.seed}): {start.task}")
        return start.info()

    def end_episode(self, result: EpisodeResult) -> None:
        result = self.schedule.judged(result)
        self.topics.episode_ended(result.to_json(), last=self.sim.finished)
        self.log.info(sim_schedule.result_line(result))
        self.films.ended(result)
        if self.sim.finished:
            self.log.info("all episodes done")
            self.done.set_result(0)
        else:
            self.start_episode()

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
            stamp_s, xy = messages.target_point(message)
        except MessageError as error:
            self.log.error(f"ignored target point: {error}")
            return
        self.sim.target_given(stamp_s, xy)

    # --- chunks ------------------------------------------------------------------------------------------
    def on_leader(self, leader: tuple[float, object]) -> None:
        """A leader arm's pose: followed from this tick for LEADER_HOLD_S, through the executor's limits."""
        self.gate.leader_heard = True
        with self.lock:
            if self.closed or not self.sim.running:
                return
            self.sim.add_chunk(self.sim.now_s, hold_chunk(leader[1], self.sim.now_s, self.config.fps).actions)

    def on_chunk(self, message: bytes, info: dict) -> None:
        with self.lock:
            self.schedule.chunk_heard((info or {}).get("publication_sequence_number") or 0, self.sim.running,
                                      self.sim.episode)
        try:
            stamp_s, actions = messages.chunk_actions(message, self.config.fps)
            with self.lock:  # between ticks, and not across an episode's start
                dropped = self.sim.policy_chunk(stamp_s, actions)
        except (MessageError, ValueError) as error:
            self.schedule.chunk_rejected()
            self.log.error(f"dropped chunk: {error}", throttle_duration_sec=2.0)
            return
        if not self.schedule.chunk_merged(dropped, stamp_s, self.sim.now_s):
            return
        self.camera_schedule.chunk_arrived(self.sim.tick)
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
            held = self.schedule.resumed()
            if held is not None:
                self.log.info(f"actions again at t={self.sim.now_s:.3f} s after {held} held ticks")
            self._step()
            if self.sim.ready():
                self.stepper.trigger()

    def on_waiting(self) -> None:
        """Lockstep, every `republish_s` of wall time: say the observation again while waiting; after the
        timeout, hold (act_node.sim_schedule.SimSchedule.waiting)."""
        with self.lock:
            if self.closed or not self.sim.running:
                return
            if self.sim.ready():  # the next action is in (a chunk held for a later tick, say): lockstep steps it
                self.stepper.trigger()
                return
            wait = self.schedule.waiting(self.sim.now_s, self.sim.episode)
            if wait.republish:
                self.publish_observation(record=False)
            self.schedule.hold(wait, lambda: not (self.closed or not self.sim.running or self.sim.ready()),
                               self._step)
            if wait.stalled and self.sim.running and self.sim.ready():  # a chunk for a later tick is due now
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
        self.topics.commanded(tick.command, tick.stamp_s)
        self.schedule.stepped(tick.held, tick.reason)
        if tick.held:
            self.log.debug(f"hold at t={self.sim.now_s:.3f} s: {tick.reason}")
        self.publish_observation()
        if tick.done:
            self.end_episode(tick.result)

    def publish_observation(self, record: bool = True) -> None:
        stamp = self.sim.now_s
        due = self.camera_schedule.due(self.sim.tick, self.sim.start_tick, self.sim.start, list(self.topics.images),
                                       self.topics.watched)
        images = self.sim.images(due) if due else {}
        self.topics.observation(stamp, images, *self.sim.joint_state())
        if record:
            self.films.shot(images, self.sim.start, stamp)

    def destroy_node(self) -> None:
        with self.lock:  # a callback on another thread finishes its tick first
            self.closed = True
            self.destroy_timer(self.timer)
            self.diagnostics.final()  # the totals (chunks received, holds) before the sim goes
            self.sim.close()
        self.films.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(SimNode, "act_sim_node", args)


if __name__ == "__main__":
    main()
