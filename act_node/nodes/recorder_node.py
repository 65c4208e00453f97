"""Recorder node (`act_recorder`): the graph's cameras, joint states and applied commands into a LeRobotDataset v3.

    act/joint_command, joint_states, camera/<name>/image_raw --> recording.FrameMatcher (by stamp)
        --> recording.DemonstrationWriter (the features, names and units of `act-sim record`) --> `root`

Episodes start and end
  - in the sim, with its episodes: /episode/start (the task and seed) and /episode/result (kept when it
    succeeded, or always with keep_failures);
  - on an arm, by hand: ~/start (std_srvs/Trigger, the `task` parameter's text) or a task text on act/run, then
    ~/stop to keep the episode or ~/discard to drop it (an empty act/run keeps it too). ~/stop answers once the
    episode is written: what was kept (its frames, the incomplete ones by what they lacked) or dropped, and why.
Each command takes the joint states of its stamp and each camera's newest frame not after it (beyond skew_s)
nor older than frame_max_age of the camera's periods (act_node.observation.FrameBounds, the policy node's rule):
an arm's cameras run on their own clocks; the sim's streams all carry the tick's stamp (frame_max_age 0).
The target for observation.environment_state comes from target/point (use_target; off: no such feature).

Writing happens on a thread of its own: the callbacks only store. An episode with more than `max_incomplete`
of its frames given up (a camera or joint state that never came for a tick) is dropped, with the reason in
the log and on ~/status. Ctrl-C, SIGTERM or an exception drop only the episode in progress and finalize the
dataset, so that LeRobot loads it; resume:=true goes on appending. A full disk drops the episode and says so.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future as RclpyFuture
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger

from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import (
    COMMANDS,
    LATCHED,
    RECORDING,
    RELIABLE,
    TARGETS,
    MessageError,
    episode_result,
    episode_start,
    image_array,
    image_stamp,
    parsed,
    sent_at,
    stamped_joint_positions,
    target_point,
)
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.recording import Recorder, RecorderSettings

# the longest ~/stop waits for its episode to be written (the frames settle in a moment; saving the videos of a
# long episode at 480x640 takes many seconds)
STOP_ANSWER_S = 120.0


class RecorderNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_recorder", **node_options)
        values = declare_node(self, "act_recorder")
        if not values["root"]:
            raise ValueError("parameter 'root' is empty: give the dataset folder to record into")
        # LeRobot's dataset module: seconds to load, so before anything is subscribed. Its import warns, with six
        # tracebacks, that torchcodec finds no FFmpeg libraries and pyav decodes instead: a recorder decodes nothing
        logging.getLogger("lerobot.utils.import_utils").setLevel(logging.ERROR)
        import lerobot.datasets.lerobot_dataset  # noqa: F401

        self.settings = RecorderSettings(
            Path(values["root"]), values["repo_id"], tuple(values["cameras"]), float(values["fps"]),
            bool(values["use_target"]), values["robot_type"], bool(values["keep_failures"]), bool(values["resume"]),
            skew_s=float(values["skew_s"]), late_s=float(values["late_s"]),
            max_incomplete=float(values["max_incomplete"]), environment_layout=str(values["environment_layout"]),
            frame_max_age=float(values["frame_max_age"]),
            camera_fps=() if list(values["camera_fps"]) == [0.0] else tuple(float(r) for r in values["camera_fps"]))
        self.recorder = Recorder(self.settings, self.say, time.monotonic)
        self.wake = threading.Event()
        self.stopping = False
        self.heard: Counter = Counter()  # messages taken, by stream
        self.bad_images: Counter = Counter()  # by camera
        self.failures, self.last_error = 0, ""
        self.diagnostics = Diagnostics(self, "dataset recorder", self.fill_diagnostics, str(self.settings.root))
        self.status_pub = self.create_publisher(String, "~/status", LATCHED)
        self.create_subscription(JointState, "joint_states", parsed(
            self, stamped_joint_positions, "joint state", self.on_joints, 2.0),
            RECORDING)
        for camera in self.settings.cameras:
            self.create_subscription(Image, f"camera/{camera}/image_raw",
                                     lambda m, c=camera: self.on_image(c, m), RECORDING, raw=True)
        if self.settings.use_target:
            self.create_subscription(PointStamped, "target/point", parsed(
                self, target_point, "target", lambda t: self.recorder.set_target(*t)), TARGETS)
        self.create_subscription(Header, "episode/start",
                                 parsed(self, episode_start, "episode start", self.on_episode_start), LATCHED)
        self.create_subscription(String, "episode/result",
                                 parsed(self, episode_result, "episode result", self.on_episode_result), RELIABLE)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)
        # the commands last: a sim waiting for this node (await_subscriber) then finds every other stream heard
        self.create_subscription(JointState, "act/joint_command", parsed(
            self, stamped_joint_positions, "joint command", self.on_command, 2.0), COMMANDS)
        self.create_service(Trigger, "~/start", self.on_start)
        # ~/stop waits (a coroutine) for its episode to be written: in a group of its own, so that the streams, ~/start
        # and ~/discard are taken meanwhile; the writer wakes the executor through a guard condition when it is done
        self.stop_group = ReentrantCallbackGroup()
        self.stop_wake = self.create_guard_condition(lambda: None, callback_group=self.stop_group)
        self.create_service(Trigger, "~/stop", self.on_stop, callback_group=self.stop_group)
        self.create_service(Trigger, "~/discard", lambda request, response: self.on_end("discard", response))
        self.thread = threading.Thread(target=self.write_loop, name="act-recorder-writer", daemon=True)
        self.thread.start()
        self.get_logger().info(f"recording {list(self.settings.cameras)} at {self.settings.fps:g} fps into "
                               f"{self.settings.root}")

    # --- callbacks: hand over, wake the writer ----------------------------------------------------------------
    def on_joints(self, joints: tuple[float, np.ndarray]) -> None:
        self.heard["joint_states"] += 1
        self.recorder.part("joints", *joints)

    def on_command(self, command: tuple[float, np.ndarray]) -> None:
        self.heard["commands"] += 1
        self.recorder.command(*command)
        self.wake.set()

    def on_image(self, camera: str, message: bytes) -> None:
        try:
            image, stamp = image_array(message), image_stamp(message)
        except MessageError as error:
            self.bad_images[camera] += 1
            self.get_logger().error(f"dropped image from camera {camera!r}: {error}", throttle_duration_sec=2.0)
            return
        self.heard[f"camera/{camera}"] += 1
        self.recorder.part(camera, stamp, image)

    def on_episode_start(self, start: tuple[float, dict]) -> None:
        start_s, info = start
        seed = info.get("seed")
        self.begin(str(info.get("task", "")), start_s, None if seed is None else int(seed), info.get("renderer"))

    def on_episode_result(self, result) -> None:
        self.recorder.end(result, result.seed)
        self.wake.set()

    def on_run(self, message: String, info) -> None:  # info: rclpy's MessageInfo (the source timestamp)
        """A run starts (and an empty one ends) where it was sent, as the policy, the selector and the scene reader
        take it: the frames between the sending and this node hearing it belong to the episode."""
        if message.data:
            self.begin(message.data, sent_at(self, info))
        else:
            self.recorder.end("stop", at_s=sent_at(self, info))
            self.wake.set()

    def on_start(self, _request, response):
        task = str(self.get_parameter("task").value)
        if not task:
            response.success, response.message = False, "parameter 'task' is empty: ros2 param set it first"
            return response
        self.begin(task, self.get_clock().now().nanoseconds * 1e-9)
        response.success, response.message = True, f"recording: {task}"
        return response

    def on_end(self, how: str, response):
        response.success = self.recorder.end(how) is not None
        response.message = f"{how}: done" if response.success else "no episode is being recorded"
        self.wake.set()
        return response

    async def on_stop(self, _request, response):
        """~/stop: keep the episode; answered once it is written, with what was kept or dropped and why. A
        coroutine: the executor goes on taking the streams (the episode's last frames) while it waits."""
        outcome = self.recorder.end("stop", at_s=self.get_clock().now().nanoseconds * 1e-9)
        self.wake.set()
        if outcome is None:
            response.success, response.message = False, "no episode is being recorded"
            return response
        written = RclpyFuture()

        def done(outcome) -> None:  # on the writer's thread: hand over, then wake the executor to resume the answer
            written.set_result(outcome.result())
            self.stop_wake.trigger()

        outcome.add_done_callback(done)
        timeout = self.create_timer(STOP_ANSWER_S, lambda: written.done() or written.set_result(
            (False, f"stop: not written within {STOP_ANSWER_S:g} s (still saving?): its outcome goes to ~/status")))
        try:
            kept, said = await written
        finally:
            self.destroy_timer(timeout)
        response.success, response.message = kept, f"stop: {said}"
        return response

    def begin(self, task: str, start_s: float, seed: int | None = None, renderer: str | None = None) -> None:
        self.recorder.begin(task, start_s, seed, renderer)
        self.wake.set()
        self.get_logger().info(f"episode from t={start_s:.3f} s: {task}")

    # --- the writer thread -------------------------------------------------------------------------------------
    def write_loop(self) -> None:
        while not self.stopping:
            self.wake.wait(timeout=0.1)
            self.wake.clear()
            try:
                while self.recorder.write_due():
                    pass
            except Exception as error:  # noqa: BLE001 (say it, drop the episode, keep the node and the dataset)
                self.failures, self.last_error = self.failures + 1, repr(error)
                self.get_logger().error(f"recording failed: {error!r}; the episode in progress is dropped")
                self.recorder.end("discard")

    def say(self, text: str, error: bool = False) -> None:
        if error:  # rclpy's logger keeps one severity per call site: two calls
            self.get_logger().error(text)
        else:
            self.get_logger().info(text)
        if self.context.ok():  # not while stopping: the context is gone
            self.status_pub.publish(String(data=json.dumps({"saved": self.recorder.saved,
                                                            "dropped": self.recorder.dropped, "last": text})))

    def fill_diagnostics(self, report: Report) -> None:
        recorder = self.recorder
        if self.diagnostics.recent("failures", self.failures):
            report.error(f"recording failed: {self.last_error}")
        dropped = self.diagnostics.recent("dropped", recorder.dropped)
        if dropped:
            report.warn(f"dropped {dropped:g} episodes recently")
        if self.diagnostics.recent("bad", sum(self.bad_images.values())):
            report.warn("dropped images recently")
        running = recorder.running
        ages, unmatched, slow = recorder.frame_report()  # each command's frames: how old, how often none
        if slow and self.settings.frame_max_age:
            report.warn(f"cameras slower than camera_fps: {'; '.join(slow)}")
        if self.diagnostics.recent("unmatched", unmatched):
            report.warn("commands recently matched no frame of a camera (frames.<camera>.unmatched)")
        report.update({"recording": "no" if running is None else f"{running.task} from t={running.start_s:.3f} s",
                       "episodes_saved": recorder.saved, "episodes_dropped": recorder.dropped,
                       "heard": self.heard, "bad_images": self.bad_images, "failures": self.failures,
                       "last_error": self.last_error, **ages})

    def destroy_node(self) -> None:
        """Let the writer finish its pass; keep what ended, drop what did not, finalize the dataset."""
        self.stopping = True
        self.wake.set()
        # never close beside the writer: closing drops the episode buffer and its images, and an episode being
        # saved (its videos encoding) then loses its frames. A save takes what it takes (many seconds for two
        # 480x640 cameras here): wait for it, saying so
        waited = 0.0
        while self.thread.is_alive():
            self.thread.join(timeout=5.0)
            waited += 5.0
            if self.thread.is_alive():
                self.get_logger().info(f"stopping: waiting for the episode being saved ({waited:.0f} s)")
        try:
            self.recorder.close()
        except Exception as error:  # noqa: BLE001 (say it: the node is going anyway)
            self.get_logger().error(f"recording failed while stopping: {error!r}")
        if self.recorder.writer is not None:
            self.get_logger().info(f"dataset {self.settings.root}: {self.recorder.writer.episodes} episodes")
        self.diagnostics.final()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(RecorderNode, "act_recorder_node", args)


if __name__ == "__main__":
    main()
