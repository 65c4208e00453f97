"""/diagnostics for every node, and the policy node's answer to inputs that stop or lie: real rclpy nodes in one
process (the `ros` executor), Fast DDS on loopback."""

import json
import time

import numpy as np
import pytest
from conftest import THREADED_RENDERER, TINY_IMAGE, retire, wait_for  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PointStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from act_node import so101  # noqa: E402
from act_node.nodes import messages  # noqa: E402
from act_node.nodes.diagnostics import Report  # noqa: E402
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR  # noqa: E402

START_S = 100.0


class Probe(Node):
    """A camera driver, an arm driver, the selector and rqt's monitor in one: publishes observations, collects
    chunks and every node's diagnostics."""

    def __init__(self, name="diagnostics_probe", namespace=""):
        """`namespace`: the graph's; /clock and /diagnostics are absolute."""
        super().__init__(name)
        self.namespace = namespace
        self.images = {c: self.create_publisher(Image, f"{namespace}/camera/{c}/image_raw", SENSOR)
                       for c in ("front", "wrist")}
        self.joints = self.create_publisher(JointState, f"{namespace}/joint_states", SENSOR)
        self.target = self.create_publisher(PointStamped, f"{namespace}/target/point", LATCHED)
        self.start = self.create_publisher(Header, f"{namespace}/episode/start", LATCHED)
        self.clock = self.create_publisher(Clock, "/clock", 10)
        self.chunks: list[float] = []
        self.create_subscription(JointTrajectory, f"{namespace}/act/action_chunk",
                                 lambda m: self.chunks.append(messages.seconds_of(m.header.stamp)), RELIABLE)
        self.statuses: dict[str, DiagnosticStatus] = {}
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, RELIABLE)

    def on_diagnostics(self, array: DiagnosticArray) -> None:
        for status in array.status:
            self.statuses[status.name] = status

    def status(self, node: Node) -> DiagnosticStatus | None:
        return next((s for name, s in self.statuses.items() if name.startswith(f"{node.get_name()}: ")), None)

    def values(self, node: Node) -> dict[str, str]:
        status = self.status(node)
        return {} if status is None else {kv.key: kv.value for kv in status.values}

    def observe(self, joints_s: float, images_s: float | None = None, cameras=("front", "wrist"),
                joints: bool = True) -> None:
        """Frames of `cameras` at `images_s` (default: `joints_s`) and, with `joints`, joint states at `joints_s`."""
        for camera in cameras:
            image = messages.image_message(np.full((*TINY_IMAGE, 3), 90, np.uint8),
                                           joints_s if images_s is None else images_s, f"{camera}_optical")
            self.images[camera].publish(image)
        if not joints:
            return
        state = messages.joint_state_message(np.zeros(6), np.zeros(6), joints_s)
        state.name = list(so101.JOINT_NAMES)
        self.joints.publish(state)

    def begin(self, start_s: float) -> None:
        self.start.publish(Header(stamp=messages.to_time(start_s), frame_id=json.dumps({"task": "pick up the cup"})))
        self.target.publish(messages.point_message((0.5, 0.25), start_s))


def policy_node(checkpoint, namespace="", **overrides):
    from act_node.nodes.policy_node import PolicyNode

    values = {"checkpoint": str(checkpoint), "replan_every": 1, **overrides}
    return PolicyNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()], namespace=namespace)


def start(ros, node, probe, start_s):
    ros.add_node(node)
    ros.add_node(probe)
    ns = probe.namespace
    assert wait_for(lambda: probe.count_subscribers(f"{ns}/joint_states") > 0 and probe.count_publishers(
        f"{ns}/act/action_chunk") > 0)
    time.sleep(0.5)
    probe.begin(start_s)
    assert wait_for(lambda: node.episode_start_s == start_s and node.target is not None)


@pytest.fixture(scope="module")
def policy(ros, tiny_checkpoint):
    node, probe = policy_node(tiny_checkpoint), Probe()
    start(ros, node, probe, START_S)
    yield node, probe
    retire(ros, node, probe)


_newest = [START_S]  # the newest stamp the module's tests have sent


def fresh(step: float = 0.5) -> float:
    """A stamp after every one sent so far."""
    _newest[0] = round(_newest[0] + step, 3)
    return _newest[0]


def answered(probe, stamp, seconds=30.0) -> bool:
    return wait_for(lambda: stamp in [pytest.approx(s) for s in probe.chunks], seconds)


def refusals(probe, node) -> str:
    return probe.values(node).get("refused", "")


def test_the_policy_node_refuses_a_frame_stamped_in_the_future_says_why_and_recovers(policy):
    node, probe = policy
    good = fresh()
    probe.observe(good)
    assert answered(probe, good), "no chunk for a good observation"
    probe.chunks.clear()
    lying = fresh()
    probe.observe(lying, images_s=lying + 5.0)  # both cameras' frames stamped 5 s after the joint states
    assert wait_for(lambda: "ahead" in refusals(probe, node), 5.0), f"not reported: {probe.values(node)}"
    status = probe.status(node)
    assert status.level == DiagnosticStatus.WARN and "ahead of the joint states" in status.message
    assert int(probe.values(node)["observations_refused"]) >= 1
    assert probe.chunks == [], "a chunk was built on a future-stamped frame"
    recovered = fresh()
    probe.observe(recovered)
    assert answered(probe, recovered), "the node did not answer again once the frames were right"
    assert probe.chunks == [pytest.approx(recovered)]


def test_a_camera_that_stops_is_reported_stale_and_answered_again_when_it_returns(policy):
    node, probe = policy
    good = fresh()
    probe.observe(good)
    assert answered(probe, good)
    probe.chunks.clear()
    stamp = good
    until = time.monotonic() + 2.0
    while time.monotonic() < until:  # the wrist and the joints go on at 20 Hz, the front camera is silent
        stamp = fresh(0.05)
        probe.observe(stamp, cameras=("wrist",))
        time.sleep(0.05)
    assert wait_for(lambda: "front stale" in refusals(probe, node), 3.0), f"not reported: {probe.values(node)}"
    values = probe.values(node)
    assert "camera/front" in values["stale_inputs"] and probe.status(node).level == DiagnosticStatus.WARN
    assert float(values["camera/front.silent_s"]) > 1.0
    # its last frame stands in for frame_max_age of its periods (the newest frame, as for a free-running camera); none
    # after that
    assert all(stamp <= good + node.matcher.oldest_s("front") for stamp in probe.chunks), \
        f"a chunk was built without the front camera: {probe.chunks} (its last frame at {good})"
    # its first frame back comes after the joints of a tick it missed: those lack the camera, not the reverse
    probe.observe(fresh(0.05), cameras=("wrist",))
    probe.observe(fresh(0.3), cameras=("front",), joints=False)
    time.sleep(1.5)
    assert "joint_states stale" not in refusals(probe, node), probe.values(node)
    back = fresh()
    probe.observe(back)
    assert answered(probe, back), "no chunk once the camera was back"
    assert wait_for(lambda: "camera/front" not in probe.values(node)["stale_inputs"], 8.0)


def test_joint_states_at_half_the_camera_rate_answer_only_the_frames_they_match(policy):
    """An arm driver publishing joint_states at 15 Hz beside 30 Hz cameras: a frame without joints of its
    stamp (within skew_s) is never paired with the joints of another tick; the frames that have them are
    answered, and the joints are not reported stale."""
    node, probe = policy
    good = fresh()
    probe.observe(good)
    assert answered(probe, good)
    probe.chunks.clear()
    stamps = [fresh(1 / 30) for _ in range(90)]
    said = []  # stale_inputs as the node reports them while the 15 Hz joints flow (its diagnostics: 1 Hz)
    for k, stamp in enumerate(stamps):
        if k % 2 == 0:
            probe.observe(stamp)  # the cameras and the joints
        else:
            probe.observe(stamp, cameras=("front", "wrist"), joints=False)
        if k == len(stamps) // 2:
            probe.statuses.clear()  # from here on, only statuses of while the joints have been flowing
        elif k > len(stamps) // 2 and probe.values(node):
            said.append(probe.values(node).get("stale_inputs", ""))
        time.sleep(1 / 30)
    assert answered(probe, stamps[-2]), f"the last frame with joints was not answered: {probe.values(node)}"
    with_joints = stamps[0::2]
    assert probe.chunks and all(any(c == pytest.approx(s) for s in with_joints) for c in probe.chunks), \
        "a chunk for a frame that had no joint state of its stamp"
    # read while they flow: once they stop (the end of this stream) they are stale after stale_s, rightly
    assert said, "no diagnostics from the policy node while the joints flowed"
    assert not any("joint_states" in stale for stale in said), said


def test_stamps_that_jump_back_restart_the_run_instead_of_waiting_for_ever(policy):
    node, probe = policy
    good = fresh()
    probe.observe(good)
    assert answered(probe, good)
    jumps = int(probe.values(node).get("time_jumps_back", "0"))
    back = START_S - 60.0  # a bag played again from its start
    probe.observe(back)
    assert answered(probe, back, 15.0), "no chunk after the stamps went back"
    assert node.episode_start_s == back  # the run goes on from the new time
    assert wait_for(lambda: int(probe.values(node).get("time_jumps_back", "0")) == jumps + 1, 3.0)
    episode = fresh(500.0)
    probe.begin(episode)  # a new episode on the old time: no jump, a fresh run
    assert wait_for(lambda: node.episode_start_s == episode)
    first = fresh()
    probe.observe(first)
    assert answered(probe, first)


def test_a_failing_inference_is_an_error_on_diagnostics(policy):
    node, probe = policy
    real = node.policy

    class Failing:
        def __call__(self, observation, task):
            raise RuntimeError("the forward pass broke")

        def __getattr__(self, name):
            return getattr(real, name)

    node.policy = Failing()
    try:
        probe.observe(fresh())
        assert wait_for(lambda: probe.status(node) is not None and probe.status(node).level == DiagnosticStatus.ERROR,
                        5.0), f"not an error: {probe.status(node)}"
        assert "forward pass broke" in probe.status(node).message
        assert int(probe.values(node)["inference_failures"]) >= 1
    finally:
        node.policy = real


def test_inference_times_and_chunks_are_counted(policy):
    node, probe = policy
    stamp = fresh()
    probe.observe(stamp)
    assert answered(probe, stamp)
    assert wait_for(lambda: int(probe.values(node).get("chunks_sent", "0")) >= 5, 3.0)
    values = probe.values(node)
    assert 0 < float(values["inference_mean_ms"]) <= float(values["inference_max_ms"])
    assert float(values["inference_last_ms"]) > 0


def test_a_clock_that_jumps_back_is_survived(ros, tiny_checkpoint):
    """use_sim_time and /clock going back (ros2 bag play --loop): the run restarts on the new time."""
    # a namespace of its own: the module's policy node hears none of it (it would answer the jumped stamps)
    node = policy_node(tiny_checkpoint, namespace="clocked", use_sim_time=True)
    probe = Probe("clock_probe", "/clocked")
    try:
        start(ros, node, probe, 300.0)

        def clock_at_300():
            probe.clock.publish(Clock(clock=messages.to_time(300.0)))
            return node.get_clock().now().nanoseconds == 300e9

        assert wait_for(clock_at_300), "the node's clock does not follow /clock"
        probe.observe(300.5)
        assert answered(probe, 300.5)
        probe.observe(310.0)  # stamped 10 s after the clock: impossible
        assert wait_for(lambda: "joint_states ahead" in refusals(probe, node), 3.0), probe.values(node)
        probe.clock.publish(Clock(clock=messages.to_time(20.0)))  # the bag starts again
        assert wait_for(lambda: node.episode_start_s == pytest.approx(20.0), 5.0), "the run did not restart"
        probe.observe(20.5)
        assert answered(probe, 20.5), "no chunk after the clock went back"
        assert probe.values(node) and wait_for(lambda: probe.values(node)["time_jumps_back"] == "1", 3.0)
    finally:
        retire(ros, node, probe)


def test_a_policy_late_to_its_run_answers_the_tick_the_sim_waits_on_then_keeps_the_grid(ros, tiny_checkpoint):
    """Lockstep, re-planning every 30 ticks: a policy that comes up after the sim has held the run's first ticks
    (its checkpoint loading slower than lockstep_timeout_s) answers the observation the sim waits on, tick 2
    here, not tick 30 five minutes of held ticks later; after that, the ticks 30 apart from the run's start."""
    node, probe = policy_node(tiny_checkpoint, namespace="late", replan_every=30), Probe("late_probe", "/late")
    try:
        start(ros, node, probe, 600.0)
        tick = lambda k: round(600.0 + k / 30, 6)  # noqa: E731
        probe.observe(tick(2))  # ticks 0 and 1 were held before the node heard anything
        assert answered(probe, tick(2)), "the first observation of the run heard is not answered"
        probe.observe(tick(3))
        probe.observe(tick(30))
        assert answered(probe, tick(30))
        assert not any(s == pytest.approx(tick(3)) for s in probe.chunks), "tick 3 is off the grid"
    finally:
        retire(ros, node, probe)


def test_a_block_whose_first_tick_is_missing_is_answered_at_its_next(ros, tiny_checkpoint):
    """every_n on an arm: the joint states come on a wall-clock timer, and a tick late past half a period rounds
    to the next. The block's next observation is answered (tick 31 for the missing 30), not nothing until tick
    60; one answer a block all the same (ticks 29 and 45 are not)."""
    node, probe = policy_node(tiny_checkpoint, namespace="jitter", replan_every=30), Probe("jitter_probe", "/jitter")
    try:
        start(ros, node, probe, 700.0)
        tick = lambda k: round(700.0 + k / 30, 6)  # noqa: E731
        probe.observe(tick(0))
        assert answered(probe, tick(0))
        probe.observe(tick(29))
        probe.observe(tick(31))
        assert answered(probe, tick(31)), "the block of ticks 30-59 is not answered without its tick 30"
        probe.observe(tick(45))
        probe.observe(tick(60))
        assert answered(probe, tick(60))
        assert sorted(set(probe.chunks)) == pytest.approx([tick(0), tick(31), tick(60)]), "more than one answer a block"
    finally:
        retire(ros, node, probe)


def test_a_stopping_node_sends_a_last_report_with_its_totals(ros, tiny_checkpoint):
    """The report of up to a second before is not the end: a node that stops sends its totals once more, so a
    monitor (or the soak bench, counting chunks sent against received) sees every chunk it sent."""
    node, probe = policy_node(tiny_checkpoint, namespace="stopping"), Probe("stopping_probe", "/stopping")
    try:
        start(ros, node, probe, 400.0)
        probe.observe(400.5)
        assert answered(probe, 400.5)
        assert wait_for(lambda: probe.values(node).get("chunks_sent") == str(len(probe.chunks)), 3.0)
        # right after a periodic report: the next would come a second later, after the node has gone
        reported = probe.status(node)
        assert wait_for(lambda: probe.status(node) is not reported, 3.0)
        for stamp in (401.0, 401.5):
            probe.observe(stamp)
            assert answered(probe, stamp)
        sent, name = len(probe.chunks), node.get_name()
        ros.remove_node(node)
        node.destroy_node()

        def last() -> dict[str, str]:
            status = next((s for n, s in probe.statuses.items() if n.startswith(f"{name}: ")), None)
            return {kv.key: kv.value for kv in status.values}

        assert wait_for(lambda: last().get("chunks_sent") == str(sent), 3.0), (sent, last())
    finally:
        retire(ros, probe)


# --- every node says how it is ------------------------------------------------------------------------------
def _reports(ros, node, keys, seconds=5.0):
    probe = Probe(f"probe_{node.get_name()}")
    ros.add_node(node)
    ros.add_node(probe)
    try:
        assert wait_for(lambda: probe.status(node) is not None, seconds), f"no /diagnostics from {node.get_name()}"
        status = probe.status(node)
        assert status.name.startswith(f"{node.get_name()}: ")
        assert set(keys) <= set(probe.values(node)), f"missing {set(keys) - set(probe.values(node))}"
        return status
    finally:
        retire(ros, probe, node)


def test_the_sim_node_reports_holds_clamps_late_chunks_episodes_and_the_realtime_factor(ros):
    from act_node.nodes.sim_node import SimNode

    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
                                       Parameter("image_height", value=48), Parameter("image_width", value=64),
                                       Parameter("objects", value=2), Parameter("record_video", value=False),
                                       Parameter("clock", value="realtime"), Parameter("episodes", value=0)],
                  namespace="simtest")  # no policy of this module answers it
    _reports(ros, sim, ["holds", "held_ticks", "clamped_ticks", "late_chunks", "episodes_done", "realtime_factor",
                        "chunks_received"])
    holds = sim.schedule.counts.holds
    assert holds["no step queued"] > 0 or holds["chunk stale"] > 0, "no chunk: it holds"


def test_the_selector_and_expert_nodes_report(ros):
    from act_node.nodes.expert_node import ExpertNode
    from act_node.nodes.selector_node import SelectorNode

    _reports(ros, SelectorNode(), ["request", "heard", "answers", "last_status"])
    _reports(ros, ExpertNode(), ["plans", "plan_failures", "chunks_sent"])


def test_the_camera_node_reports(ros, tmp_path, monkeypatch):
    import cv2
    import test_arm_camera
    from lerobot.cameras.opencv import camera_opencv

    from act_node.nodes.camera_node import CameraNode

    # the file read at 30 fps and looping, like a webcam (tests/test_arm_camera.py's capture)
    test_arm_camera.REAL_CAPTURE[:] = [cv2.VideoCapture]
    monkeypatch.setattr(camera_opencv.cv2, "VideoCapture", test_arm_camera.PacedCapture)

    path = tmp_path / "front.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    for k in range(120):  # as tests/test_arm_camera.py's: a moving line on red
        frame = np.zeros((48, 64, 3), np.uint8)
        frame[:, :, 2] = 200
        frame[:, k % 64] = 255
        writer.write(frame)
    writer.release()
    node = CameraNode(parameter_overrides=[Parameter("name", value="front"), Parameter("device", value=str(path))])
    _reports(ros, node, ["frames_published", "rate_hz", "read_failures"])


def test_the_recorder_node_reports(ros, tmp_path):
    from act_node.nodes.recorder_node import RecorderNode

    node = RecorderNode(parameter_overrides=[Parameter("root", value=str(tmp_path / "data"))])
    _reports(ros, node, ["recording", "episodes_saved", "episodes_dropped", "heard"], seconds=10.0)


def test_a_stop_while_an_episode_is_saved_waits_for_the_save(ros, tmp_path):
    """Closing the dataset drops the episode buffer and its images: beside a save still encoding the videos
    (seconds for two 480x640 cameras) it lost the episode (bench_recorder wrote 0 of 600 frames). The stop now
    waits for the writer, however long the save (here 11 s: the old wait gave up after 10)."""
    import threading

    from act_node.nodes.recorder_node import RecorderNode

    node = RecorderNode(parameter_overrides=[Parameter("root", value=str(tmp_path / "data"))])
    saving, saved, order = threading.Event(), threading.Event(), []

    def slow_write_due(drain: bool = False) -> bool:
        if not saving.is_set():
            saving.set()
            time.sleep(11.0)  # LeRobot's save_episode encoding the videos
            order.append("saved")
            saved.set()
        return False

    close = node.recorder.close

    def closing() -> None:
        order.append("closed" if saved.is_set() else "closed during the save")
        close()

    node.recorder.write_due, node.recorder.close = slow_write_due, closing
    node.wake.set()
    assert saving.wait(5.0)
    node.destroy_node()
    assert order == ["saved", "closed"]


def test_a_report_keeps_its_worst_level_and_the_reasons_of_that_level():
    report = Report()
    report.warn("a")
    report.error("b")
    report.warn("c")
    report.error("d")
    assert report.level == DiagnosticStatus.ERROR and report.message == "b; d"
    report.add("counts", {"x": 2, "y": 1})
    report.add("empty", {})
    assert report.values == {"counts": "x 2, y 1", "empty": "none"}
