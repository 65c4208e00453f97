"""The sim and selector nodes over real rclpy: holds, refused chunks, absent and unknown kinds."""

import math
import time

import numpy as np
import pytest
from conftest import THREADED_RENDERER, retire, wait_for
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from act_node.nodes import messages
from act_node.nodes.messages import LATCHED, RELIABLE


@pytest.fixture
def sim(ros, tmp_path):
    from rclpy.parameter import Parameter

    from act_node.nodes.sim_node import SimNode

    node = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
        Parameter("image_height", value=48), Parameter("image_width", value=64), Parameter("objects", value=2),
        Parameter("lockstep_timeout_s", value=0.2), Parameter("replan_every", value=10),
        Parameter("video_dir", value=str(tmp_path)), Parameter("record_video", value=False)])
    ros.add_node(node)
    yield node
    retire(ros, node)  # closes the env too, once a tick in progress has finished


def test_a_stalled_policy_makes_the_sim_hold(sim):
    start = sim.sim.joint_state()[0]
    assert wait_for(lambda: sim.sim.held_ticks >= 3, seconds=5.0)
    assert np.abs(sim.sim.joint_state()[0] - start).max() < math.radians(2.0)


def test_bad_chunks_reach_nothing_in_the_sim_and_a_good_one_after_them_does(sim, ros):
    sender = Node("chunk_sender")
    publisher = sender.create_publisher(JointTrajectory, "/act/action_chunk", RELIABLE)
    ros.add_node(sender)
    assert wait_for(lambda: sender.count_subscribers("/act/action_chunk") > 0), "the sim never subscribed"
    now = sim.sim.now_s + 5.0  # ahead of the sim: nothing of a good chunk is dropped as past
    empty = messages.chunk_message(np.zeros((0, 6)), now, 30)
    backwards = messages.chunk_message(np.zeros((4, 6)), now, 30)
    backwards.points[3].time_from_start = messages.to_duration(0.01)
    unknown = messages.chunk_message(np.zeros((4, 6)), now, 30, names=tuple("abcdef"))
    nan = messages.chunk_message(np.full((4, 6), math.nan), now, 30)
    for bad in (empty, backwards, unknown, nan):
        publisher.publish(bad)
    # the control: a good chunk sent after the bad ones on the same reliable topic arrives after them
    publisher.publish(messages.chunk_message(np.zeros((4, 6)), now + 1.0, 30))
    assert wait_for(lambda: abs(sim.sim.executor.newest_stamp_s - (now + 1.0)) < 1e-6), "the good chunk never came"
    assert sim.sim.executor.queued_ticks() == [round((now + 1.0) * 30) + k for k in range(4)]
    retire(ros, sender)


def camera_listener(ros, name: str) -> tuple[Node, list[float], list[float]]:
    """A node noting the stamps of the front camera's images and of the joint states, on the executor."""
    from sensor_msgs.msg import Image, JointState

    from act_node.nodes.messages import SENSOR

    listener = Node(name)
    images, joints = [], []
    listener.create_subscription(Image, "/camera/front/image_raw",
                                 lambda m: images.append(messages.seconds_of(m.header.stamp)), SENSOR)
    listener.create_subscription(JointState, "/joint_states",
                                 lambda m: joints.append(messages.seconds_of(m.header.stamp)), SENSOR)
    ros.add_node(listener)
    return listener, images, joints


def test_the_sim_renders_a_camera_only_at_the_ticks_the_policy_answers(sim, ros):
    listener, images, joints = camera_listener(ros, "camera_listener")
    start = sim.sim.start.stamp_s
    ticks = lambda stamps: {round((s - start) * 30) for s in stamps}  # noqa: E731
    # no policy: the sim holds a tick every time it gives up waiting; replan_every is 10
    assert wait_for(lambda: max(ticks(joints), default=0) >= 21, seconds=30.0), "the sim did not tick on"
    assert {10, 20} <= ticks(images), f"no image at the re-plan ticks: {sorted(ticks(images))}"
    assert all(t % 10 == 0 for t in ticks(images)), f"images between re-plan ticks: {sorted(ticks(images))}"
    assert len(ticks(joints)) > 2 * len(ticks(images))  # the joints go out every tick
    retire(ros, listener)


def test_in_realtime_the_cameras_render_at_the_start_after_each_chunk_and_after_a_second_without(ros, tmp_path):
    from rclpy.parameter import Parameter

    from act_node.nodes.sim_node import SimNode

    listener, images, joints = camera_listener(ros, "realtime_camera_listener")
    sender = listener.create_publisher(JointTrajectory, "/act/action_chunk", RELIABLE)
    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
        Parameter("clock", value="realtime"), Parameter("image_height", value=48), Parameter("image_width", value=64),
        Parameter("objects", value=2), Parameter("video_dir", value=str(tmp_path)),
        Parameter("record_video", value=False)])
    ros.add_node(sim)
    try:
        start = sim.sim.start.stamp_s
        ticks = lambda stamps: sorted({round((s - start) * 30) for s in stamps})  # noqa: E731
        assert wait_for(lambda: ticks(joints) and ticks(joints)[-1] >= 20, seconds=30.0), "the sim did not tick on"
        first = ticks(images)
        assert len(first) == 1 and first[0] < 20, f"images without a chunk: {first}"
        # a chunk (hold where the arm is): the next tick renders, and then nothing until a second has passed
        sent = round((sim.sim.now_s - start) * 30)
        hold = np.tile(sim.sim.joint_state()[0], (40, 1))
        sender.publish(messages.chunk_message(hold, sim.sim.now_s, 30))
        assert wait_for(lambda: len(ticks(images)) >= 2, seconds=5.0), "no image after the chunk"
        answered = ticks(images)[1]
        assert sent <= answered <= sent + 6, (sent, answered)
        assert wait_for(lambda: ticks(joints)[-1] >= answered + 36, seconds=10.0)
        assert ticks(images)[1:] == [answered, answered + 30], ticks(images)
    finally:
        retire(ros, sim, listener)


def test_a_realtime_sim_awaiting_its_driver_starts_the_first_episode_once_one_publishes_chunks(ros, tmp_path):
    """await_driver (the launch sets it under clock:=realtime): the wall clock does not wait, so the first episode
    waits for a publisher on act/action_chunk (the policy node makes its own once its checkpoint is loaded)
    instead of running while the policy loads."""
    from rclpy.parameter import Parameter

    from act_node.nodes.graph import describe
    from act_node.nodes.sim_node import SimNode

    assert describe(clock="realtime")[0].parameters["await_driver"] is True
    assert "await_driver" not in describe()[0].parameters  # lockstep waits for the chunks themselves
    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
        Parameter("clock", value="realtime"), Parameter("await_driver", value=True),
        Parameter("image_height", value=48), Parameter("image_width", value=64), Parameter("objects", value=2),
        Parameter("video_dir", value=str(tmp_path)), Parameter("record_video", value=False)],
        cli_args=["--ros-args", "-r", "__ns:=/await_driver"])  # its own namespace: no publisher another test left
    driver = Node("late_driver")
    ros.add_node(sim)
    ros.add_node(driver)
    try:
        time.sleep(1.0)
        assert sim.sim.start is None and sim.sim.tick == 0, "an episode ran before any driver was there"
        driver.create_publisher(JointTrajectory, "/await_driver/act/action_chunk", RELIABLE)
        assert wait_for(lambda: sim.sim.start is not None, seconds=10.0), "no episode once a driver publishes"
    finally:
        retire(ros, sim, driver)


def test_a_recorder_that_matches_the_target_publisher_late_is_sent_the_earlier_targets_too(ros):
    """target/point keeps its last 8 (messages.TARGETS, the selector's and the sim's publisher, the recorder's
    subscription): a recorder that discovers the selector only during episode 2 (seconds late, seen under load)
    still gets episode 1's target, which a depth of 1 had lost."""
    source = Node("early_targets")
    publisher = source.create_publisher(PointStamped, "/late_match/target/point", messages.TARGETS)
    for stamp in (1.0, 5.0, 9.0):  # three episodes' targets, before anyone listens
        publisher.publish(messages.point_message((0.4, 0.1 * stamp), stamp))
    late = Node("late_recorder")
    heard = []
    late.create_subscription(PointStamped, "/late_match/target/point",
                             lambda m: heard.append(messages.target_point(m)[0]), messages.TARGETS)
    ros.add_node(source)
    ros.add_node(late)
    try:
        assert wait_for(lambda: len(heard) == 3, seconds=10.0), heard
        assert heard == [1.0, 5.0, 9.0]
    finally:
        retire(ros, source, late)


def test_in_realtime_a_tick_that_overruns_is_made_up_so_the_sim_keeps_to_the_wall_clock(ros, tmp_path):
    from rclpy.parameter import Parameter

    from act_node.nodes.sim_node import SimNode

    arrived = []  # (wall time, sim seconds) of each joint state
    listener = Node("realtime_clock_listener")
    listener.create_subscription(messages.JointState, "/joint_states", lambda m: arrived.append(
        (time.monotonic(), messages.seconds_of(m.header.stamp))), messages.SENSOR)
    ros.add_node(listener)
    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
        Parameter("clock", value="realtime"), Parameter("cameras", value=["front"]),
        Parameter("image_height", value=48), Parameter("image_width", value=64), Parameter("objects", value=2),
        Parameter("max_steps", value=3000), Parameter("video_dir", value=str(tmp_path)),
        Parameter("record_video", value=False)])
    start = sim.sim.start.stamp_s
    tick_of = lambda seconds: round((seconds - start) * 30)  # noqa: E731
    step = sim.sim.step

    def stall_once():  # tick 20 takes 0.3 s (nine periods), as a long render or a scene build would
        if sim.sim.tick - sim.sim.start_tick == 20:
            time.sleep(0.3)
        return step()

    sim.sim.step = stall_once
    ros.add_node(sim)
    try:
        assert wait_for(lambda: arrived and tick_of(arrived[-1][1]) >= 75, seconds=30.0), "the sim did not tick on"

        def ticks_behind(first: int, last: int) -> float:  # wall time between two ticks, in periods, less ticks
            (t0, k0), (t1, k1) = [next((t, tick_of(s)) for t, s in arrived if tick_of(s) >= k) for k in (first, last)]
            return (t1 - t0) * 30 - (k1 - k0)

        assert ticks_behind(5, 15) < 2, arrived[:20]
        assert ticks_behind(5, 75) < 3, f"{ticks_behind(5, 75):.1f} ticks behind the wall clock after the stall"
    finally:
        retire(ros, sim, listener)


def test_selector_node_answers_absent_and_refuses_unknown_kinds(ros):
    from act_node.nodes.selector_node import SelectorNode

    probe = Node("selector_probe")
    # The sim nodes of the tests above latched "pick up the cup" on /episode/start: they must be gone, or
    # the selector would take that request too and answer it.
    assert wait_for(lambda: probe.count_publishers("/episode/start") == 0), "an earlier node still latches"
    node = SelectorNode()
    assert node.point_pub.qos_profile.depth == messages.TARGETS.depth  # a late recorder gets earlier targets too
    statuses, points = [], []
    probe.create_subscription(String, "/target/status", lambda m: statuses.append(m.data), LATCHED)
    probe.create_subscription(PointStamped, "/target/point", points.append, LATCHED)
    scene = probe.create_publisher(messages.MarkerArray, "/scene/objects", LATCHED)
    request = probe.create_publisher(String, "/target/request", RELIABLE)
    ros.add_node(node)
    ros.add_node(probe)
    wait_for(lambda: probe.count_subscribers("/target/request") > 0)
    scene.publish(messages.scene_markers([("cup", 0.4, 0.3, 0.0, 0.06, 0.03), ("pen", 0.6, 0.2, 1.0, 0.015, 0.06)],
                                         5.0, 1))
    time.sleep(0.3)
    request.publish(String(data="cup"))
    assert wait_for(lambda: points and statuses and statuses[-1].startswith("found"))
    assert (points[-1].point.x, points[-1].point.y) == pytest.approx((0.4, 0.3), abs=0.01)
    found = len(points)
    request.publish(String(data="ball"))
    assert wait_for(lambda: statuses[-1] == "absent: no ball on the table")
    request.publish(String(data="plate"))
    assert wait_for(lambda: statuses[-1].startswith("error: unknown object kind 'plate'"))
    time.sleep(0.3)
    assert len(points) == found, "a point was published for an absent or unknown kind"
    retire(ros, node, probe)


