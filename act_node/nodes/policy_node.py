"""Policy node: camera images + joint states (+ the target) -> one ACT action chunk per answered observation.

Observations are matched by header stamps, never by arrival order: each joint state takes each camera's newest
frame not stamped after it (beyond `skew_s`) nor older than `frame_max_age` of that camera's periods
(act_node.observation.FrameBounds; 0: only frames of its own stamp, the sim's). In `every_n` mode
(the default, and what the sim and arm graphs run) it answers one observation in each block of `replan_every`
ticks from the episode's start, the block's first it has (lockstep: the sim waits for exactly those); in
`latest` mode it answers the newest complete observation whenever it is free. Chunks go out in radians,
`time_from_start` = k / fps, stamped with the observation's stamp. Bad messages are logged and dropped; nothing
is inferred from them.

Inference runs on the node's own thread, never in a subscription callback: the callbacks only store
(images and joints keep arriving while the policy thinks) and wake it; it then answers the newest
observation that is due, so in realtime the observations that came in meanwhile are skipped, not queued.

Inputs that stop or lie are refused, never answered: an observation whose camera frames are stamped more
than `ahead_s` after its joint states (or the clock), a camera or joint_states silent for `stale_s` while an
observation waits for it, an observation more than `stale_s` behind the newest joint state or the clock. Each
refusal is counted by reason on /diagnostics, and logged once per onset. The stamps going back by more than
`jump_back_s` (a `ros2 bag play --loop`, a sim that restarted) reset the run's state: the matcher, the policy's
queue and the answered stamp; the run goes on from the new time (or from the next episode/start).

Runs start on the sim's /episode/start or, on an arm, without the sim: a non-empty std_msgs/String on
/act/run starts a run with that task text from now (an empty one ends it), and `run_on_start` starts one
with the `task` parameter as the node comes up.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64, Header, String
from trajectory_msgs.msg import JointTrajectory

from act_node import so101
from act_node.checkpoints import checkpoint_layout, readable_checkpoint_cameras, trained_renderer
from act_node.config import DEFAULT_CAMERAS, FPS, task_kind
from act_node.description import tool_point
from act_node.nodes.chunk_path import ChunkPath
from act_node.nodes.diagnostics import Diagnostics, Report
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
from act_node.observation import (
    FRAME_MAX_AGE,
    FrameAges,
    ObservationMatcher,
    build_observation,
    periods_of_rates,
    requested_kind,
)
from act_node.policy import OBS_ENV_STATE, OBS_IMAGES, ChunkPolicy, FeatureSpec, resized_frame

POLICY_PARAMETERS = (
    Spec("checkpoint", "", "LeRobot pretrained_model folder"),
    from_config("device"),
    from_config("threads"),
    Spec("cameras", list(DEFAULT_CAMERAS), "the cameras the checkpoint was trained on, each read from "
         "camera/<name>/image_raw"),
    Spec("joint_names", list(so101.JOINT_NAMES), "joint_states names in the checkpoint's state order"),
    Spec("fps", float(FPS), "ticks a second: chunk steps are 1/fps apart", low=1.0),
    Spec("skew_s", 0.01, "seconds within which stamps count as one instant: a camera frame stamped up to this much "
         "after the joint states may be theirs (the clocks' jitter)", low=0.0, high=1.0),
    Spec("frame_max_age", FRAME_MAX_AGE, "the oldest camera frame a joint state takes, in that camera's periods "
         "(1 / camera_fps) before the joint states' stamp, beyond skew_s: each joint state takes "
         "each camera's newest frame within it (cameras on their own clocks, an arm's); 0: only frames of the joint "
         "states' own stamp (the sim, whose streams all carry the tick's stamp)", low=0.0, high=100.0),
    Spec("camera_fps", [0.0], "each camera's frames a second, in the order of cameras: its period is what "
         "frame_max_age counts in ([0.0]: fps for every camera)"),
    Spec("infer", "every_n", "every_n: answer one observation each replan_every ticks, the checkpoint's "
         "n_action_steps (the sim under both clocks, an arm); latest: the newest whenever free",
         choices=("every_n", "latest")),
    from_config("replan_every"),
    Spec("use_target", True, "feed target/point and the task's requested kind as environment_state when the "
         "checkpoint takes it"),
    Spec("task", "", "the run's task text when run_on_start"),
    Spec("run_on_start", False, "an arm without the sim: run from the start (else on act/run or episode/start)"),
    Spec("stale_s", 1.0, "seconds an observation may lie behind the newest joint state or the clock, or wait for a "
         "silent camera or joint_states, before it is refused as stale", low=0.01),
    Spec("ahead_s", 1.0, "seconds a camera frame may be stamped after its joint states (or a message after the "
         "clock) before it is refused as impossible", low=0.01),
    Spec("jump_back_s", 1.0, "seconds the joint states' stamps or the clock may go back before it counts as a jump "
         "back (a bag played in a loop): the run's state resets", low=0.01),
)


@dataclass
class PolicyStats:
    """What the node counts for /diagnostics (under the node's lock)."""

    inferences: int = 0
    inference_last_s: float = 0.0
    inference_total_s: float = 0.0
    inference_max_s: float = 0.0
    inference_failures: int = 0
    last_failure: str = ""
    chunks_sent: int = 0
    chunks_resent: int = 0  # to an observation said again (lockstep)
    chunks_dropped: int = 0  # computed for a run that ended meanwhile
    skipped: int = 0  # due observations passed over for a newer one (realtime)
    refused: Counter = field(default_factory=Counter)  # observations and messages refused, by reason
    last_refusal: str = ""
    bad_messages: Counter = field(default_factory=Counter)  # by source: undecodable, wrong size, NaN, names
    clock_jumps: int = 0

# how long destroy_node waits for the inference thread to finish the answer it is computing (one forward pass)
STOP_INFERENCE_S = 10.0


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
        # a checkpoint in the target_tool_yaw layout reads the requested object's yaw from the yaw reader's cameras
        # (act_node.perception.yaw) at each run's first observation, whether or not it takes images itself: the node
        # subscribes to the checkpoint's cameras and the reader's, and feeds the ACT only its own
        self.reads_yaw = checkpoint_layout(checkpoint) == "target_tool_yaw"
        self.yaw_reader = None  # loaded on the inference thread, beside the policy
        self._runs = 0  # runs begun (begin()): the yaw read belongs to one
        self._run_yaw: tuple[int, np.ndarray] | None = None  # (run number, the yaw read at its first observation)
        self.reader_cameras: list[str] = []
        if self.trained == {} and self.cameras:  # a checkpoint that takes no images (joints and target only)
            if not self.reads_yaw:
                self.get_logger().info(f"the checkpoint takes no camera images: not subscribing to {self.cameras}")
            self.act_cameras = []
        elif self.reads_yaw and self.trained:  # the cameras it does not take itself are the reader's only
            self.act_cameras = [c for c in self.cameras if c in self.trained]
        else:
            self.act_cameras = list(self.cameras)
        if self.reads_yaw:
            from act_node.perception.yaw import READER_CAMERAS

            missing = [c for c in READER_CAMERAS if c not in self.cameras]
            if missing:
                raise ValueError(f"checkpoint {checkpoint} reads the requested object's yaw from cameras "
                                 f"{list(READER_CAMERAS)} (act_node.perception.yaw); parameter 'cameras' is "
                                 f"{self.cameras}, without {missing}")
            self.reader_cameras = list(READER_CAMERAS)
            self.get_logger().info(f"the yaw reader reads cameras {self.reader_cameras} at each run's first "
                                   f"observation" + ("" if self.act_cameras else "; the checkpoint takes no image"))
        self.cameras = [*self.act_cameras, *(c for c in self.reader_cameras if c not in self.act_cameras)]
        topics = [f"camera/{c}/image_raw" for c in self.cameras]
        # what drew the checkpoint's training images: the sim's episode/start says what draws them now
        self.trained_renderer: str | None = None
        try:
            if self.act_cameras:
                self.trained_renderer = trained_renderer(checkpoint)
            elif self.reads_yaw:  # the reader was trained on TinyRenderer's images
                self.trained_renderer = "tiny"
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
        self.environment_layout = self.policy.environment_layout or "target"  # checked against the layouts at load
        self.image_sizes = {c: tuple(self.policy.config.input_features[f"{OBS_IMAGES}.{c}"].shape[1:])
                            for c in self.act_cameras}
        # frames of any size are taken; the ACT gets each at its trained size, the yaw reader at its own (each
        # resizes as LeRobot's processors do: act_node.policy.resized_frame); each camera's size is logged once
        self.frame_sizes: dict[str, tuple[int, int]] = {}
        rates = [float(rate) for rate in values["camera_fps"]]
        periods = periods_of_rates(list(values["cameras"]), [] if rates == [0.0] else rates, self.fps)
        self.matcher = ObservationMatcher(["joints", *self.cameras], skew_s, max_age=float(values["frame_max_age"]),
                                          periods={camera: periods[camera] for camera in self.cameras})
        # each joint state's frames (the matcher's ages: how old each camera's was, or none), and the frames of the
        # observations answered
        self.ticks, self.answered_ages = self.matcher.ages, FrameAges()
        self._reset_policy = False
        self.target: tuple[float, np.ndarray] | None = None
        self.episode_start_s: float | None = None
        self.task = ""
        self.answered_s = -np.inf
        self._answered_in_run = False  # a chunk went out for the run (episode) under way
        self.answer: tuple[float, bytes] | None = None  # the last chunk sent and its observation's stamp
        self.stale_s, self.ahead_s = float(values["stale_s"]), float(values["ahead_s"])
        self.jump_back_s = float(values["jump_back_s"])
        self.stats = PolicyStats()
        self._run_on_clock = False  # the run was started from this node's clock: stamps are on its time
        self._run_since = time.monotonic()  # wall time the run began (silence of a source never heard)
        self._heard: dict[str, float] = {}  # source -> wall time (monotonic) of its last message
        self._newest_joints_s = -math.inf  # the newest joint state's stamp: a jump back is measured from it
        self._waiting_since: float | None = None  # wall time since which due observations lack a part
        self._refused_s = -math.inf  # the newest observation stamp refused (each is counted once)
        self._refused_since_answer = 0
        self._onset: str | None = None  # the reason last logged: one line per onset, not per message
        self._waiting_for_target = False
        self.chunk_pub = self.create_publisher(JointTrajectory, "act/action_chunk", RELIABLE)
        self.path = ChunkPath(self, self.joint_names)  # the chunk's tool path for RViz, act/chunk_path
        self.latency_pub = self.create_publisher(Float64, "act/inference_latency", RELIABLE)
        # raw: image_array reads the serialized bytes, rclpy does not build an Image of them; the topics as resolved
        # (remapped: rename_map:=, a driver's topic), for the log
        topics = [self.create_subscription(Image, topic, lambda m, c=camera: self.on_image(c, m), SENSOR,
                                           raw=True).topic_name for camera, topic in zip(self.cameras, topics)]
        self.create_subscription(JointState, "joint_states", parsed(
            self, self._joints_of, "joint state", self.on_joints, 2.0), SENSOR)
        # latched topics: a node that starts late still gets the episode and its target
        self.target_topic = self.create_subscription(PointStamped, "target/point", parsed(
            self, target_point, "target", self.on_target), LATCHED).topic_name  # resolved: remapped, namespaced
        self.create_subscription(Header, "episode/start", parsed(self, episode_start, "episode start",
                                                                  self.on_episode), LATCHED)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)
        # a clock that goes back (use_sim_time and a bag played in a loop): the run's state resets
        self._jump = self.get_clock().create_jump_callback(JumpThreshold(
            min_forward=None, min_backward=Duration(seconds=-self.jump_back_s), on_clock_change=False),
            post_callback=self.on_clock_jump)
        self.diagnostics = Diagnostics(self, "ACT policy", self.fill_diagnostics, str(self.policy.path))
        self._ready.set()  # the inference thread may answer from here on
        if values["run_on_start"]:
            self._check_task(str(values["task"]))  # ValueError: refused at start, naming the kinds
            self.begin(self.get_clock().now().nanoseconds * 1e-9, str(values["task"]), on_clock=True)
        self.get_logger().info(f"policy {self.policy.path}: cameras {dict(zip(self.cameras, topics))}, "
                               f"chunk {self.policy.chunk_size}, replan every {self.replan_every} ticks, "
                               f"infer {self.infer_mode}, target "
                               f"{self.environment_layout if self.wants_target else 'no'}")

    def _load(self, checkpoint: str, device: str) -> ChunkPolicy:
        if not checkpoint:
            raise ValueError("parameter 'checkpoint' is empty: give a pretrained_model folder")
        trained = self.trained or {}
        spec = FeatureSpec(cameras={c: trained.get(c, (0, 0)) for c in self.act_cameras},
                           state_dim=len(self.joint_names))
        policy = ChunkPolicy.load(checkpoint, device=device, expect=spec)
        if self.reads_yaw:
            from act_node.perception.yaw import YawReader

            self.yaw_reader = YawReader.load()
        return policy

    # --- callbacks: each stores, then tries to answer ----------------------------------------------------
    def on_image(self, camera: str, message: bytes) -> None:
        try:
            image = image_array(message)
            stamp = image_stamp(message)
        except MessageError as error:
            with self._lock:
                self.stats.bad_messages[camera] += 1
            self.get_logger().error(f"dropped image from camera {camera!r}: {error}", throttle_duration_sec=2.0)
            return
        if self._ahead_of_clock(camera, stamp):
            return
        if self.frame_sizes.get(camera) != image.shape[:2]:
            self._say_frame_size(camera, image.shape[:2])
        with self._lock:
            self._heard[camera] = time.monotonic()
            self.matcher.add(camera, stamp, image)
        self._wake.set()

    def _say_frame_size(self, camera: str, size: tuple[int, int]) -> None:
        """Once per camera (and again should its size change): what size its frames come at and what they become."""
        from act_node.perception.yaw import READER_IMAGE_SIZE

        self.frame_sizes[camera] = size
        sizes = []
        trained = self.image_sizes.get(camera)
        if trained is not None and tuple(trained) != tuple(size):
            sizes.append(f"to {trained[0]}x{trained[1]} for the checkpoint")
        if camera in self.reader_cameras and READER_IMAGE_SIZE != size:
            sizes.append(f"to {READER_IMAGE_SIZE[0]}x{READER_IMAGE_SIZE[1]} for the yaw reader")
        said = f"resized {' and '.join(sizes)}" if sizes else "the size it was trained on"
        self.get_logger().info(f"camera {camera!r}: {size[0]}x{size[1]} frames, {said}")

    def _joints_of(self, message: JointState) -> tuple[float, np.ndarray]:
        try:
            return stamped_joint_positions(message, self.joint_names)
        except MessageError:
            with self._lock:
                self.stats.bad_messages["joint_states"] += 1
            raise  # parsed() logs it

    def on_joints(self, joints: tuple[float, np.ndarray]) -> None:
        stamp = joints[0]
        if self._ahead_of_clock("joint_states", stamp):
            return
        with self._lock:
            self._heard["joints"] = time.monotonic()
            jumped = self._newest_joints_s - stamp > self.jump_back_s
            if jumped:
                back = self._newest_joints_s - stamp
                self._restart_locked(stamp)
            self._newest_joints_s = max(self._newest_joints_s, stamp)
            answer = self.answer if self.answer is not None and self.answer[0] == stamp else None
            if answer is None:
                self.matcher.add("joints", *joints)
            else:
                self.stats.chunks_resent += 1
        if jumped:
            self._say_restart(f"the joint states' stamps went back {back:.3f} s", stamp)
        if answer is not None:
            # a lockstep sim says an observation again only while it waits for its chunk: the chunk was lost
            # (sent before the sim's subscription matched, say); send it again (the sim merges a copy once)
            self.chunk_pub.publish(answer[1])
            return
        self._wake.set()

    def on_clock_jump(self, jump) -> None:
        """The node's clock went back by more than jump_back_s (ROS time: /clock, a bag played in a loop)."""
        now_s = self.get_clock().now().nanoseconds * 1e-9
        with self._lock:
            if self._newest_joints_s <= now_s + self.jump_back_s:
                return  # the joint states' stamps went back first: already restarted on the new time
            self._restart_locked(now_s)
            self._newest_joints_s = -math.inf  # the next joint state starts the new time
        self._say_restart(f"the clock went back {-jump.delta.nanoseconds * 1e-9:.3f} s", now_s)

    def _restart_locked(self, start_s: float) -> None:
        """The time went back: forget every stamp of the old time (all but the parts of the observation at
        `start_s`, which may have come before the joint state that showed the jump); the run, if any, goes on
        from `start_s`."""
        self.stats.clock_jumps += 1
        self.matcher.forget(lambda at: abs(at - start_s) > self.matcher.skew_s)
        self.answer = None
        self._waiting_since, self._refused_s, self._refused_since_answer = None, -math.inf, 0
        self._newest_joints_s = start_s
        if self.episode_start_s is not None:
            self.episode_start_s = start_s
            self.answered_s = start_s - 1.0 / self.fps
            self._reset_policy = True  # on the inference thread, before its next answer
            self._answered_in_run = False
        else:
            self.answered_s = -math.inf

    def _say_restart(self, why: str, start_s: float) -> None:
        # throttled: two publishers of one topic on different times (a bag played beside a live driver) jump
        # back and forth at their rate; the count is on /diagnostics (time_jumps_back)
        self.get_logger().warn(f"{why} (to t={start_s:.3f} s): the time jumped back; the matcher, the policy's "
                               f"queue and the answered stamp are reset" +
                               (f", the run goes on from t={start_s:.3f} s" if self.episode_start_s is not None
                                else ""), throttle_duration_sec=2.0)
        self._wake.set()

    def _clock_s(self) -> float | None:
        """The node's clock when the stamps are on its time (ROS time from /clock, or a run started from the
        clock, as on an arm), else None: a sim's stamps without use_sim_time are on another time."""
        clock = self.get_clock()
        if not (clock.ros_time_is_active or self._run_on_clock):
            return None
        now = clock.now().nanoseconds * 1e-9
        return now if now > 0 else None  # ROS time before the first /clock message reads 0

    def _ahead_of_clock(self, source: str, stamp: float) -> bool:
        """Whether a message is stamped more than ahead_s after the clock: impossible, refused (and counted)."""
        now = self._clock_s()
        if now is None or stamp - now <= self.ahead_s:
            return False
        with self._lock:
            self._refuse_locked(None, f"{source} ahead", f"{source} stamped {stamp - now:.3f} s ahead of the clock")
        return True

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
        try:
            self._check_task(message.data)
        except ValueError as error:
            self.get_logger().error(f"run request refused: {error}; the run under way (if any) goes on")
            return
        self.begin(self.get_clock().now().nanoseconds * 1e-9, message.data, on_clock=True)

    def _check_task(self, task: str) -> None:
        """A checkpoint fed the request needs a task naming a kind it knows; ValueError says which it got."""
        if self.wants_target:
            task_kind(task)

    def begin(self, start_s: float, task: str, on_clock: bool = False) -> None:
        """A run (an episode) from `start_s`: the policy's queue and the matcher start empty. `on_clock`: the
        start was read from this node's clock (an arm's run), so stamps are checked against it."""
        with self._lock:
            self.episode_start_s, self.task = start_s, task
            self._runs += 1  # a new run: the yaw is read again at its first observation
            self._run_on_clock, self._run_since = on_clock, time.monotonic()
            self.matcher.clear()
            self._newest_joints_s = -math.inf
            self._waiting_since, self._refused_s, self._refused_since_answer = None, -math.inf, 0
            self.answer = None
            self.answered_s = self.episode_start_s - 1.0 / self.fps
            self._reset_policy = True  # on the inference thread, before its next answer
            self._answered_in_run = False
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
                with self._lock:
                    self.stats.inference_failures += 1
                    self.stats.last_failure = repr(error)
                self.get_logger().error(f"inference failed: {error!r}", throttle_duration_sec=2.0)


    # --- answering -------------------------------------------------------------------------------------
    def _tick(self, stamp: float) -> int:
        return round((stamp - self.episode_start_s) * self.fps)

    def _slot(self, stamp: float) -> float:
        """every_n: the block of replan_every ticks (from the run's start) a stamp falls in; latest: the stamp."""
        return stamp if self.infer_mode == "latest" else self._tick(stamp) // self.replan_every

    def _due(self, stamp: float) -> bool:
        """every_n: an observation in a later block of replan_every ticks than the last answer's, so the answers
        stand replan_every ticks apart, as the checkpoint's n_action_steps says (1, every tick, when it ensembles).
        A lockstep sim waits on each block's first tick, so that one is answered; on an arm, whose joint states come
        on a wall-clock timer,
        a block's first tick may be late or missing, and the block's next observation is answered instead of
        none until the block after. Before the run's first answer, any tick: a lockstep sim holds a tick each
        lockstep_timeout_s while nothing answers, and a policy that comes up after that (a checkpoint loading
        slower than the timeout on a busy machine, or started after the sim, as ros2 launch may) answers the tick
        the sim waits on, instead of waiting for the next block while the sim holds one tick each timeout."""
        return not self._answered_in_run or self._slot(stamp) > self._slot(self.answered_s)

    def try_answer(self) -> bool:
        """Answer the newest due observation, if there is one (on the inference thread); whether it did."""
        due = self._take_due()
        if due is None:
            return False
        stamp, parts, task, target, run, serial = due
        started = time.perf_counter()  # the yaw read (a run's first answer) counts in the answer's time
        try:  # with the target where the selector found it, and the request (the task's kind), one-hot
            about = ()
            if self.wants_target:  # target_tool: and the tool's place, by forward kinematics from these joints
                tool = tool_point(parts["joints"]) if self.environment_layout != "target" else None
                about = (target[1], requested_kind(task), self.environment_layout, tool, self._yaw(serial, parts, task))
            images = {c: resized_frame(parts[c], self.image_sizes[c]) for c in self.act_cameras}
            observation = build_observation(parts["joints"], images, *about)
        except ValueError as error:
            self.get_logger().error(f"no chunk for t={stamp:.3f} s: the checkpoint takes the target and the "
                                    f"request, and the task {task!r} gives {error}", throttle_duration_sec=2.0)
            return False
        chunk, _ = self.policy(observation, task)
        took = time.perf_counter() - started
        with self._lock:
            stats = self.stats
            stats.inferences += 1
            stats.inference_last_s, stats.inference_total_s = took, stats.inference_total_s + took
            stats.inference_max_s = max(stats.inference_max_s, took)
            if self.episode_start_s != run:  # the run ended or another began while it thought: not for now
                stats.chunks_dropped += 1
                self.get_logger().info(f"dropped the chunk for t={stamp:.3f} s: its run is over")
                return False
        self._publish(so101.from_lerobot(chunk), stamp, started)
        return True

    def _yaw(self, serial: int, parts: dict, task: str) -> np.ndarray | None:
        """target_tool_yaw: the yaw the reader read at the first answered observation of run number `serial`
        (read now if this is it), as the env reads it at reset, and held through the run (a clock jump included);
        None for the other layouts. ValueError from the reader (a misshapen image, a task that names no kind).
        On the inference thread only."""
        if not self.reads_yaw:
            return None
        if self._run_yaw is None or self._run_yaw[0] != serial:
            images = {c: parts[c] for c in self.reader_cameras}
            self._run_yaw = (serial, self.yaw_reader.read(images, requested_kind(task)))
        return self._run_yaw[1]

    def _take_due(self):
        """The newest due, complete observation not yet answered, as (stamp, parts, task, target, run, run
        number), marked answered; None when there is none (or the target for this episode has not come). The
        policy is reset here, before the first answer of a run."""
        with self._lock:
            if self.episode_start_s is None:
                return None
            found = self.matcher.newest(after_s=self.answered_s, accept=self._due)
            if found is None:
                self._explain_missing()
                return None
            stamp, parts = found
            stale = self._stale(stamp)
            if stale is not None:  # complete but too old (or ahead of the clock): refused, never answered
                self._refuse_locked(stamp, *stale)
                self.answered_s = stamp
                return None
            target = self.target
            self._waiting_for_target = self.wants_target and (target is None
                                                              or target[0] < self.episode_start_s - 1e-6)
            if self._waiting_for_target:
                self.get_logger().warn(f"waiting for {self.target_topic} for this episode", throttle_duration_sec=2.0)
                return None
            reset, self._reset_policy = self._reset_policy, False
            passed = len({self._slot(s) for s, _ in self.matcher.buffers["joints"]
                          if self.answered_s < s < stamp and self._due(s)} - {self._slot(stamp)})
            self.stats.skipped += max(0, passed - self._refused_since_answer)
            self._refused_since_answer, self._waiting_since = 0, None
            if self._onset is not None:
                self.get_logger().info(f"answering again from t={stamp:.3f} s (after: {self._onset})")
                self._onset = None
            self.answered_s, self._answered_in_run = stamp, True
            for camera, part in self.matcher.match(stamp).items():
                self.answered_ages.add(camera, stamp - part[0])
            due = (stamp, parts, self.task, target, self.episode_start_s, self._runs)
        if reset:
            self.policy.reset()
        return due

    def _stale(self, stamp: float) -> tuple[str, str] | None:
        """(reason, why) when the complete observation of `stamp` is too old or ahead of the clock, else None."""
        behind = self._newest_joints_s - stamp
        if behind > self.stale_s:  # complete only with old joint states: a camera lags
            newest = {c: self.matcher.newest_stamp(c) for c in self.cameras}
            lagging = [c for c, at in newest.items() if at is None or at < self._newest_joints_s - self.stale_s]
            return (f"{(lagging or ['observation'])[0]} stale",
                    f"the observation at t={stamp:.3f} s is {behind:.3f} s behind the joint states")
        now = self._clock_s()
        if now is not None and now - stamp > self.stale_s:
            return "observation stale", f"the observation at t={stamp:.3f} s is {now - stamp:.3f} s behind the clock"
        if now is not None and stamp - now > self.ahead_s:
            return "observation ahead", f"the observation at t={stamp:.3f} s is {stamp - now:.3f} s ahead of the clock"
        return None

    def _explain_missing(self) -> None:
        """No complete due observation: when one is due but a part is missing, say which and why (a frame
        stamped ahead: at once; a part stale or silent: once it has waited stale_s), counted once per stamp."""
        stamp = self.matcher.newest_anchor(after_s=self.answered_s, accept=self._due)
        if stamp is None:
            return
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        waited = now - self._waiting_since
        silent = {source: now - self._heard.get(source, self._run_since) for source in ("joints", *self.cameras)}
        problem = None
        for camera, offset in self.matcher.misses(stamp).items():  # the cameras with no frame for it
            ahead = (self.matcher.newest_stamp(camera) or stamp) - stamp  # its newest frame: after the joint states?
            if ahead > self.ahead_s and silent["joints"] <= self.stale_s:
                problem = (f"{camera} ahead", f"camera {camera}'s newest frames are stamped {ahead:.3f} s ahead of "
                           f"the joint states of t={stamp:.3f} s")
                self.matcher.forget(lambda at, limit=stamp + self.ahead_s: at > limit, camera)  # impossible
                break
            if waited <= self.stale_s:
                continue
            if offset is not None and offset > 0 and silent["joints"] > self.stale_s:  # frames after, joints silent
                problem = ("joint_states stale", f"no joint states for {silent['joints']:.1f} s")
            else:  # none at all, only later ones (it was silent then), or only ones older than the bound
                bound = (f"older than its bound of {self.matcher.oldest_s(camera):.3f} s: skew_s and frame_max_age "
                         f"{self.matcher.bounds.max_age:g} periods of {self.matcher.periods[camera] * 1e3:.0f} ms")
                nearest = "no frame" if offset is None else f"its nearest frame {offset:.3f} s after" if offset > 0 \
                    else f"its newest frame {-offset:.3f} s before, {bound}"
                how = f"silent for {silent[camera]:.1f} s" if silent[camera] > self.stale_s else \
                    "publishing, but no frame for them"
                problem = (f"{camera} stale", f"camera {camera} {how} ({nearest} the joint states of t={stamp:.3f} s)")
            break
        if problem is not None:
            self._refuse_locked(stamp, *problem)

    def _refuse_locked(self, stamp: float | None, reason: str, why: str) -> None:
        """Count a refused observation (once per stamp; None: a message) and log it once per onset."""
        if stamp is not None:
            if stamp <= self._refused_s:
                return
            self._refused_s = stamp
            self._refused_since_answer += 1
        self.stats.refused[reason] += 1
        self.stats.last_refusal = why
        if self._onset != reason:
            self._onset = reason
            self.get_logger().warn(f"no chunk: {why} (refused: {reason}; said once until it changes or clears)")

    def fill_diagnostics(self, report: Report) -> None:
        """Once a second (executor thread): what the node did and why it answers nothing, if it does not."""
        self._wake.set()  # the inference thread looks again at an observation that waits for a silent part
        now = time.monotonic()
        with self._lock:
            stats, run = self.stats, self.episode_start_s
            refused = sum(stats.refused.values())
            silent = {source: now - self._heard[source] if source in self._heard else None
                      for source in ("joints", *self.cameras)}
            waiting = self._waiting_since is not None and now - self._waiting_since > self.stale_s
            target = self._waiting_for_target
            self.ticks.bounds = self.answered_ages.bounds = {
                camera: (self.matcher.periods[camera], self.matcher.measured_period_s(camera) or math.nan,
                         self.matcher.oldest_s(camera)) for camera in self.cameras}
            slow = self.ticks.slow()
            ticks, answered = self.ticks.report("frames."), self.answered_ages.report("answered.")
            unmatched = self.ticks.unmatched()
        names = {"joints": "joint_states", **{c: f"camera/{c}" for c in self.cameras}}
        stale = [names[s] for s, quiet in silent.items() if run is not None and (quiet is None or quiet > self.stale_s)
                 and (s == "joints" or waiting)]
        failed, refused_now = self.diagnostics.recent("failures", stats.inference_failures), \
            self.diagnostics.recent("refused", refused)
        jumped = self.diagnostics.recent("jumps", stats.clock_jumps)
        if failed:
            report.error(f"inference failed: {stats.last_failure}")
        if refused_now:
            report.warn(f"refused {refused_now:g} observations recently: {stats.last_refusal}")
        if stale:
            report.warn(f"stale inputs: {', '.join(stale)}")
        if jumped:
            report.warn("the time jumped back: the run's state was reset")
        if slow and self.matcher.bounds.max_age:
            report.warn(f"cameras slower than camera_fps: {'; '.join(slow)}")
        missed = self.diagnostics.recent("unmatched", unmatched)
        if missed:
            report.warn(f"{missed:g} joint states recently matched no frame of a camera (frames.<camera>.unmatched)")
        if target:
            report.warn(f"waiting for {self.target_topic}")
        mean = stats.inference_total_s / stats.inferences if stats.inferences else 0.0
        report.update({
            "run": "none" if run is None else f"from t={run:.3f} s", "task": self.task, "infer": self.infer_mode,
            "inferences": stats.inferences, "inference_last_ms": stats.inference_last_s * 1e3,
            "inference_mean_ms": mean * 1e3, "inference_max_ms": stats.inference_max_s * 1e3,
            "inference_failures": stats.inference_failures, "last_failure": stats.last_failure,
            "chunks_sent": stats.chunks_sent, "chunks_resent": stats.chunks_resent,
            "chunks_dropped": stats.chunks_dropped, "observations_skipped": stats.skipped,
            "observations_refused": refused, "refused": stats.refused, "last_refusal": stats.last_refusal,
            "bad_messages": stats.bad_messages, "time_jumps_back": stats.clock_jumps,
            "stale_inputs": ", ".join(stale) or "none",
        })
        for source, quiet in silent.items():
            report.add(f"{names[source]}.silent_s", "never heard" if quiet is None else f"{quiet:.2f}")
        # each joint state's frames once no later frame could change them (frames.*), and those of the observations
        # answered (answered.*)
        report.update({**ticks, **answered})

    def _publish(self, chunk_rad: np.ndarray, stamp: float, started: float) -> None:
        """The chunk (chunk_size, 6) radians out, answering the observation of `stamp`, with its latency and path."""
        data = serialized_chunk(chunk_rad, stamp, self.fps, self.joint_names)
        with self._lock:
            self.answer = (stamp, data)
            self.stats.chunks_sent += 1
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
