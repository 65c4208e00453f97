"""The ROS 2 graph over real rclpy and Fast DDS on loopback: one ROS_DOMAIN_ID per test run."""

import itertools
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_IMAGE, retire, wait_for  # noqa: E402
from geometry_msgs.msg import PointStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from act_node import so101  # noqa: E402
from act_node.config import shipped_checkpoint  # noqa: E402
from act_node.nodes import messages  # noqa: E402
from act_node.nodes.graph import describe, ros_arguments  # noqa: E402
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR  # noqa: E402

STAMPS = itertools.count(start=11.0, step=0.5)  # observation times, always later than the last


class Probe(Node):
    """Publishes what a camera driver, an arm driver and the selector would, and collects chunks."""

    def __init__(self):
        super().__init__("probe")
        self.images = {c: self.create_publisher(Image, f"/camera/{c}/image_raw", SENSOR)
                       for c in ("front", "wrist")}
        self.joints = self.create_publisher(JointState, "/joint_states", SENSOR)
        self.target = self.create_publisher(PointStamped, "/target/point", LATCHED)
        self.start = self.create_publisher(Header, "/episode/start", LATCHED)
        self.chunks: list[JointTrajectory] = []
        self.create_subscription(JointTrajectory, "/act/action_chunk", self.chunks.append, RELIABLE)

    def begin(self, node, stamp: float, task: str) -> None:
        """Start a run at `stamp` (episode/start with the task, the target at (0.5, 0.25)); wait until `node` has
        both."""
        self.start.publish(Header(stamp=messages.to_time(stamp), frame_id=json.dumps({"task": task})))
        self.target.publish(messages.point_message((0.5, 0.25), stamp))
        assert wait_for(lambda: node.episode_start_s == stamp and node.target is not None and node.target[0] == stamp)

    def observe(self, stamp: float, encoding="rgb8", size=TINY_IMAGE, joints=None, names=so101.JOINT_NAMES,
                images=None):
        """Both cameras (gray frames of `size`, or `images[camera]`) and the joint states, all at `stamp`."""
        for camera, publisher in self.images.items():
            pixels = np.full((*size, 3), 90, np.uint8) if images is None else images[camera]
            image = messages.image_message(pixels, stamp, f"{camera}_optical")
            image.encoding = encoding
            publisher.publish(image)
        positions = np.zeros(6) if joints is None else joints
        state = messages.joint_state_message(positions, np.zeros(6), stamp)
        state.name = list(names)
        self.joints.publish(state)


def make_policy_node(checkpoint):
    from rclpy.parameter import Parameter

    from act_node.nodes.policy_node import PolicyNode

    return PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(checkpoint)),
                                           Parameter("replan_every", value=1)])


@pytest.fixture(scope="module")
def policy(ros, tiny_checkpoint):
    node = make_policy_node(tiny_checkpoint)
    probe = Probe()
    ros.add_node(node)
    ros.add_node(probe)
    wait_for(lambda: probe.count_subscribers("/joint_states") > 0 and probe.count_publishers("/act/action_chunk") > 0)
    time.sleep(0.5)
    probe.begin(node, 10.0, "pick up the cup")
    yield node, probe
    retire(ros, node, probe)


# before the tests of the module's `policy` fixture: its probe's latched episode start and target (stamp 10)
# would also reach this test's node, and a late one starts another episode under it
def test_a_target_tool_checkpoint_is_fed_the_tool_relative_to_the_target(ros, tiny_tool_checkpoint):
    """A checkpoint trained on environment_state's 13-number layout gets the tool's place relative to the target
    from the joints it is sent, as the recorder and the env built them."""
    from act_node.description import tool_point
    from act_node.observation import environment_state

    node = make_policy_node(tiny_tool_checkpoint)
    probe = Probe()
    ros.add_node(node)
    ros.add_node(probe)
    node.policy = spy = Recording(node.policy)
    try:
        assert node.environment_layout == "target_tool" and node.cameras == []
        assert wait_for(lambda: probe.count_subscribers("/joint_states") > 0)
        probe.begin(node, 80.0, "pick up the cup")
        joints = np.array([0.2, -0.4, 0.5, 0.3, -0.1, 0.2])
        state = messages.joint_state_message(joints, np.zeros(6), 80.5)
        state.name = list(so101.JOINT_NAMES)
        probe.joints.publish(state)
        assert wait_for(lambda: probe.chunks, seconds=30.0), ("no chunk from the target_tool checkpoint",
                                                              node.target, node.episode_start_s)
        fed = spy.fed[-1]["environment_state"]
        assert fed.shape == (13,)
        assert fed == pytest.approx(environment_state((0.5, 0.25), "cup", tool_point(joints), "target_tool"), abs=1e-6)
    finally:
        node.policy = spy.policy
        retire(ros, node, probe)


def test_a_checkpoint_of_the_yaw_layout_reads_the_yaw_from_the_cameras_once_a_run(ros):
    """models/act_target_tool_yaw takes no image itself: the node subscribes to the yaw reader's cameras, reads the
    pen's yaw from the run's first observation (as the env reads it at reset) and feeds the same two numbers with
    every later observation of the run."""
    from act_lab.vision.yaw import yaw_error_deg
    from act_node.description import tool_point
    from act_node.observation import environment_state
    from act_node.perception.yaw import READER_CAMERAS, READER_IMAGE_SIZE, symmetric_yaw
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, target_source="truth",
                        request="pen")
    first, _ = env.reset(seed=2003)
    (pen,) = [s for s in env.table.task.object_states() if s.kind == "pen"]
    joints = env.table.robot.joint_positions()
    env.close()
    from act_node.paths import models_dir

    node = make_policy_node(models_dir() / "act_target_tool_yaw")
    probe = Probe()
    ros.add_node(node)
    ros.add_node(probe)
    node.policy = spy = Recording(node.policy)
    try:
        assert node.environment_layout == "target_tool_yaw" and node.cameras == list(READER_CAMERAS)
        assert wait_for(lambda: all(probe.count_subscribers(f"/camera/{c}/image_raw") > 0 for c in READER_CAMERAS))
        probe.begin(node, 90.0, "pick up the pen")
        probe.observe(90.5, images=first["pixels"], joints=joints)
        assert wait_for(lambda: probe.chunks, seconds=30.0), "no chunk from the target_tool_yaw checkpoint"
        fed = spy.fed[-1]
        assert fed["pixels"] == {} and fed["environment_state"].shape == (15,)
        read = node.yaw_reader.read(first["pixels"], "pen")
        assert fed["environment_state"] == pytest.approx(
            environment_state((0.5, 0.25), "pen", tool_point(joints), "target_tool_yaw", read), abs=1e-5)
        assert yaw_error_deg(read, symmetric_yaw("pen", pen.yaw), 2) < 15
        # later in the run the cameras show something else: the yaw read at the run's start stays
        count = len(probe.chunks)
        probe.observe(91.0, size=READER_IMAGE_SIZE, joints=joints)
        assert wait_for(lambda: len(probe.chunks) > count, seconds=30.0)
        assert spy.fed[-1]["environment_state"][-2:] == pytest.approx(read, abs=1e-6)
        # the next run reads again, from its own first observation (another scene, its pen another way)
        env = PickObjectEnv(objects=4, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, target_source="truth",
                            request="pen")
        second, _ = env.reset(seed=2001)
        env.close()
        again = node.yaw_reader.read(second["pixels"], "pen")
        assert yaw_error_deg(again, read, 2) > 10  # the two scenes' pens lie differently
        probe.begin(node, 95.0, "pick up the pen")
        count = len(probe.chunks)
        probe.observe(95.5, images=second["pixels"], joints=joints)
        assert wait_for(lambda: len(probe.chunks) > count, seconds=30.0)
        assert spy.fed[-1]["environment_state"][-2:] == pytest.approx(again, abs=1e-6)
    finally:
        node.policy = spy.policy
        retire(ros, node, probe)


def test_a_checkpoint_of_the_grasp_layout_plans_the_grasp_among_the_runs_objects(ros):
    """models/act_target_tool_yaw_grasp: the node waits for the run's scene/objects (one of an earlier run does not
    count), then plans the grasp among them from the run's first observation, as the env plans it at reset; with
    use_scene false (an arm whose target is a clicked point) it plans from the target and the yaw read alone."""
    from rclpy.parameter import Parameter
    from visualization_msgs.msg import MarkerArray

    from act_node.grasp import planned_grasp
    from act_node.nodes.policy_node import PolicyNode
    from act_node.paths import models_dir
    from act_node.perception.yaw import READER_CAMERAS, READER_IMAGE_SIZE
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, target_source="truth",
                        request="pen")
    first, _ = env.reset(seed=2003)
    objects = env.object_poses()
    (pen,) = [o for o in objects if o[0] == "pen"]
    joints = env.table.robot.joint_positions()
    env.close()
    checkpoint = models_dir() / "act_target_tool_yaw_grasp"
    node = make_policy_node(checkpoint)
    blind = PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(checkpoint)),
                                            Parameter("replan_every", value=1), Parameter("use_scene", value=False)],
                       namespace="blind")
    probe = Probe()
    scene = probe.create_publisher(MarkerArray, "/scene/objects", LATCHED)
    markers = [(*o, 0.02, 0.03) for o in objects]
    retired = []
    ros.add_node(node)
    ros.add_node(probe)
    node.policy = spy = Recording(node.policy)
    try:
        assert node.environment_layout == "target_tool_yaw_grasp" and node.cameras == list(READER_CAMERAS)
        assert wait_for(lambda: probe.count_subscribers("/scene/objects") > 0)
        scene.publish(messages.scene_markers(markers, 99.0, 0))  # an earlier run's
        probe.start.publish(Header(stamp=messages.to_time(100.0), frame_id=json.dumps({"task": "pick up the pen"})))
        probe.target.publish(messages.point_message(pen[1:3], 100.0))
        assert wait_for(lambda: node.episode_start_s == 100.0 and node.target is not None
                        and node.target[0] == 100.0)
        probe.observe(100.5, images=first["pixels"], joints=joints)
        time.sleep(1.5)
        assert not probe.chunks, "answered before the run's scene/objects came"
        scene.publish(messages.scene_markers(markers, 100.0, 1))
        assert wait_for(lambda: probe.chunks, seconds=30.0), "no chunk once the run's scene came"
        fed = spy.fed[-1]["environment_state"]
        read = node.yaw_reader.read(first["pixels"], "pen")
        start = so101.to_lerobot(joints).astype(np.float32)
        expected = planned_grasp(start, pen[1:3], "pen", objects, node.fps, read)
        assert expected.source == "scene" and fed.shape == (19,)
        assert fed[13:15] == pytest.approx(read, abs=1e-6)
        assert fed[15:] == pytest.approx(expected.numbers, abs=1e-4)
        # held through the run: a later scene (the arm in the front camera's way, say) plans nothing again
        count = len(probe.chunks)
        scene.publish(messages.scene_markers([(*pen, 0.02, 0.03)], 101.0, 1))
        probe.observe(101.0, images=first["pixels"], joints=joints)
        assert wait_for(lambda: len(probe.chunks) > count, seconds=30.0)
        assert spy.fed[-1]["environment_state"][15:] == pytest.approx(fed[15:], abs=1e-7)
        retire(ros, node)
        retired = [node]
        # no scene: the pen alone at the target, lying as the reader read it
        ros.add_node(blind)
        blind.policy = blind_spy = Recording(blind.policy)
        assert blind.count_subscribers("/blind/scene/objects") == 0 and not blind.observer.wants_scene
        assert blind.observer.wants_grasp
        ahead = [probe.create_publisher(kind, f"/blind/{topic}", qos) for kind, topic, qos in (
            (Header, "episode/start", LATCHED), (PointStamped, "target/point", LATCHED),
            (JointState, "joint_states", SENSOR))]
        images = {c: probe.create_publisher(Image, f"/blind/camera/{c}/image_raw", SENSOR) for c in READER_CAMERAS}
        answered = []
        probe.create_subscription(JointTrajectory, "/blind/act/action_chunk", answered.append, RELIABLE)
        assert wait_for(lambda: probe.count_subscribers("/blind/joint_states") > 0)
        ahead[0].publish(Header(stamp=messages.to_time(200.0), frame_id=json.dumps({"task": "pick up the pen"})))
        ahead[1].publish(messages.point_message(pen[1:3], 200.0))
        assert wait_for(lambda: blind.target is not None and blind.target[0] == 200.0)
        for camera in READER_CAMERAS:
            images[camera].publish(messages.image_message(first["pixels"][camera], 200.5, f"{camera}_optical"))
        state = messages.joint_state_message(joints, np.zeros(6), 200.5)
        state.name = list(so101.JOINT_NAMES)
        ahead[2].publish(state)
        assert wait_for(lambda: answered, seconds=30.0), "no chunk without a scene"
        alone = planned_grasp(start, pen[1:3], "pen", None, blind.fps, read)
        assert alone.source == "target alone"
        assert blind_spy.fed[-1]["environment_state"][15:] == pytest.approx(alone.numbers, abs=1e-4)
    finally:
        retire(ros, *(n for n in (node, blind, probe) if n not in retired))


@pytest.fixture(scope="module")
def tiny_camera_yaw_checkpoint(tmp_path_factory):
    """A tiny ACT that takes the wrist camera at 96x128 and environment_state's target_tool_yaw (two expert
    episodes recorded with the yaw reader, then lerobot-train for 3 steps)."""
    from conftest import TINY_ACT, record_two

    from act_node.envs import yaw_reader
    from act_node.training import train

    root = record_two(tmp_path_factory, "act_node_pick_cam_yaw", cameras=("wrist",), image_size=(96, 128),
                      environment_layout="target_tool_yaw", yaw_reader=yaw_reader())
    out = tmp_path_factory.mktemp("train_cam_yaw") / "run"
    return train(root, "local/act_node_pick_cam_yaw", out, steps=3, device="cpu", extra=TINY_ACT)


def test_a_camera_checkpoint_of_the_yaw_layout_gets_its_camera_and_the_readers_yaw(ros, tiny_camera_yaw_checkpoint):
    """A checkpoint that takes the wrist camera itself and reads the yaw: the node subscribes to the wrist (its
    own and the reader's) and the front (the reader's only), feeds the ACT only the wrist, and the reader both."""
    from act_node.perception.yaw import READER_CAMERAS, READER_IMAGE_SIZE
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, target_source="truth",
                        request="pen")
    first, _ = env.reset(seed=2003)
    joints = env.table.robot.joint_positions()
    env.close()
    node = make_policy_node(tiny_camera_yaw_checkpoint)
    probe = Probe()
    ros.add_node(node)
    ros.add_node(probe)
    node.policy = spy = Recording(node.policy)
    try:
        assert node.environment_layout == "target_tool_yaw"
        assert node.act_cameras == ["wrist"] and sorted(node.cameras) == ["front", "wrist"]
        assert wait_for(lambda: all(probe.count_subscribers(f"/camera/{c}/image_raw") > 0 for c in READER_CAMERAS))
        probe.begin(node, 100.0, "pick up the pen")
        probe.observe(100.5, images=first["pixels"], joints=joints)
        assert wait_for(lambda: probe.chunks, seconds=30.0), "no chunk from the camera checkpoint of the yaw layout"
        fed = spy.fed[-1]
        assert list(fed["pixels"]) == ["wrist"] and np.array_equal(fed["pixels"]["wrist"], first["pixels"]["wrist"])
        assert fed["environment_state"][-2:] == pytest.approx(node.yaw_reader.read(first["pixels"], "pen"), abs=1e-6)
    finally:
        node.policy = spy.policy
        retire(ros, node, probe)


def test_a_chunk_arrives_with_names_points_spacing_and_stamp(policy):
    node, probe = policy
    probe.chunks.clear()
    probe.observe(10.5)
    assert wait_for(lambda: probe.chunks), "no chunk"
    chunk = probe.chunks[-1]
    assert list(chunk.joint_names) == list(so101.JOINT_NAMES)
    assert len(chunk.points) == node.policy.chunk_size == 20
    times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in chunk.points]
    assert times == pytest.approx([k / 30 for k in range(20)], abs=1e-6)
    assert messages.seconds_of(chunk.header.stamp) == pytest.approx(10.5)
    stamp, actions = messages.chunk_actions(chunk, 30)
    assert actions.shape == (20, 6) and np.all(np.isfinite(actions))


@pytest.mark.parametrize("bad", [
    dict(encoding="mono8"), dict(encoding="yuv422"),
    dict(joints=np.array([0, 0, math.nan, 0, 0, 0.0])),
    dict(names=("a", "b", "c", "d", "e", "f")),
    dict(names=so101.JOINT_NAMES[:5] + ("thumb",)),
])
def test_bad_input_leaves_the_node_running_and_publishes_nothing_built_on_it(policy, bad):
    node, probe = policy
    probe.chunks.clear()
    stamp = next(STAMPS)
    probe.observe(stamp, **bad)
    probe.observe(stamp + 0.05)  # the control: a good observation after the bad one, answered in order
    assert wait_for(lambda: probe.chunks, seconds=30.0), "the node stopped answering"
    stamps = [messages.seconds_of(chunk.header.stamp) for chunk in probe.chunks]
    assert stamps == pytest.approx([stamp + 0.05]), f"a chunk was built on {bad}: stamps {stamps}"


def test_frames_of_another_size_are_resized_to_the_checkpoints_and_answered_alike(policy):
    """A camera at 96x128 or 240x320 for a 48x64 checkpoint: each frame is resized as LeRobot resizes
    (act_node.policy.resized_frame); a uniform frame stays the same uniform frame, so the chunks are equal."""
    node, probe = policy
    probe.chunks.clear()
    stamp = next(STAMPS)
    for k, size in enumerate([TINY_IMAGE, (96, 128), (240, 320)]):
        probe.observe(stamp + 0.05 * k, size=size)
        assert wait_for(lambda k=k: len(probe.chunks) > k, seconds=30.0), f"no chunk for frames of {size}"
    chunks = [messages.chunk_actions(chunk, 30)[1] for chunk in probe.chunks]
    assert np.abs(chunks[1] - chunks[0]).max() < 1e-5 and np.abs(chunks[2] - chunks[0]).max() < 1e-5
    assert node.frame_sizes == {"front": (240, 320), "wrist": (240, 320)}


def test_a_checkpoint_without_images_answers_from_joints_and_target_alone(ros, tiny_state_checkpoint):
    """The graph's cameras stay on for the selector; the policy node subscribes to none of them."""
    node = make_policy_node(tiny_state_checkpoint)  # cameras left at the default, front and wrist
    probe = Probe()
    ros.add_node(node)
    ros.add_node(probe)
    try:
        assert node.cameras == [] and not [s.topic_name for s in node.subscriptions if "camera" in s.topic_name]
        assert wait_for(lambda: probe.count_subscribers("/joint_states") > 0)
        probe.begin(node, 70.0, "pick up the cup")
        state = messages.joint_state_message(np.zeros(6), np.zeros(6), 70.5)
        state.name = list(so101.JOINT_NAMES)
        probe.joints.publish(state)  # joints only: no image is sent
        assert wait_for(lambda: probe.chunks, seconds=30.0), "no chunk from joints and target alone"
        assert messages.seconds_of(probe.chunks[-1].header.stamp) == pytest.approx(70.5)
    finally:
        retire(ros, node, probe)


class Recording:
    """A policy that notes each observation it is fed, then answers as the real one."""

    def __init__(self, policy):
        self.policy, self.fed, self.threads = policy, [], set()

    def __call__(self, observation, task):
        self.fed.append(observation)
        self.threads.add(threading.current_thread().name)
        return self.policy(observation, task)

    def __getattr__(self, name):
        return getattr(self.policy, name)


def test_the_target_and_the_tasks_request_enter_as_environment_state(policy):
    from act_node.observation import environment_state

    node, probe = policy
    node.policy = spy = Recording(node.policy)
    try:
        for start, task in ((40.0, "fetch me a coffee"), (50.0, "pick up the cup")):
            probe.chunks.clear()
            probe.begin(node, start, task)
            probe.observe(start + 0.5)
            if task == "fetch me a coffee":  # no kind to request: logged, nothing inferred or sent
                time.sleep(1.0)
                assert not probe.chunks and not spy.fed
        assert wait_for(lambda: probe.chunks), "no chunk for the cup"
        assert np.array_equal(spy.fed[-1]["environment_state"], environment_state((0.5, 0.25), "cup"))
    finally:
        node.policy = spy.policy
        probe.begin(node, 10.0, "pick up the cup")


class Slow(Recording):
    """A policy that takes three seconds to think."""

    thinking = False

    def __call__(self, observation, task):
        self.thinking = True
        time.sleep(3.0)
        self.thinking = False
        return super().__call__(observation, task)


def test_observations_keep_arriving_while_the_policy_thinks_and_the_newest_is_answered_next(policy):
    node, probe = policy
    node.policy = slow = Slow(node.policy)
    try:
        probe.chunks.clear()
        first = next(STAMPS)
        probe.observe(first)
        assert wait_for(lambda: slow.thinking), "no inference started"
        for later in (first + 0.1, first + 0.2):
            probe.observe(later)
        # the callbacks are not held up by the inference: both observations are in before the first chunk
        assert wait_for(lambda: node.matcher.newest_stamp("joints") == pytest.approx(first + 0.2), seconds=2.5)
        assert slow.thinking and not probe.chunks
        assert wait_for(lambda: len(probe.chunks) == 2, seconds=15.0)
        # then the newest due observation is answered; the one in between is skipped, not queued
        assert [messages.seconds_of(c.header.stamp) for c in probe.chunks] == pytest.approx([first, first + 0.2])
    finally:
        node.policy = slow.policy


def test_torch_runs_on_the_inference_thread_alone_from_the_checkpoints_load(policy, tiny_checkpoint, monkeypatch):
    """The main thread must not start torch's OpenMP pool (a second thread's pool then stops spinning on
    few cores: 1.7x the inference time, see PolicyNode._inference)."""
    from act_node.policy import ChunkPolicy

    loaded_on = []
    load = ChunkPolicy.load.__func__

    def noting_load(cls, *arguments, **options):
        loaded_on.append(threading.current_thread().name)
        return load(cls, *arguments, **options)

    monkeypatch.setattr(ChunkPolicy, "load", classmethod(noting_load))
    make_policy_node(tiny_checkpoint).destroy_node()
    assert loaded_on == ["act-policy-inference"]
    node, probe = policy
    node.policy = spy = Recording(node.policy)
    try:
        probe.chunks.clear()
        probe.observe(next(STAMPS))
        assert wait_for(lambda: probe.chunks), "no chunk"
        assert spy.threads == {"act-policy-inference"}
    finally:
        node.policy = spy.policy


def test_a_mismatched_checkpoint_is_refused_at_start(tiny_checkpoint):
    result = subprocess.run([sys.executable, "-m", "act_node.nodes.policy_node", "--ros-args", "-p",
                             f"checkpoint:={tiny_checkpoint}", "-p", "cameras:=[front,top]"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "refusing to start" in result.stderr
    assert "the checkpoint wants camera 'observation.images.wrist', which is not fed" in result.stderr
    assert "Traceback" not in result.stderr


def test_chunk_messages_are_refused_when_empty_non_monotonic_or_unnamed():
    good = messages.chunk_message(np.zeros((3, 6)), 1.0, 30)
    stamp, actions = messages.chunk_actions(good, 30)
    assert stamp == pytest.approx(1.0) and actions.shape == (3, 6)
    empty = messages.chunk_message(np.zeros((0, 6)), 1.0, 30)
    with pytest.raises(messages.MessageError, match="no points"):
        messages.chunk_actions(empty, 30)
    backwards = messages.chunk_message(np.zeros((3, 6)), 1.0, 30)
    backwards.points[2].time_from_start = messages.to_duration(0.0)
    with pytest.raises(messages.MessageError, match="not strictly increasing"):
        messages.chunk_actions(backwards, 30)
    renamed = messages.chunk_message(np.zeros((3, 6)), 1.0, 30, names=tuple("abcdef"))
    with pytest.raises(messages.MessageError, match="lacks joints"):
        messages.chunk_actions(renamed, 30)


@pytest.mark.parametrize("seconds, sec, nanosec", [
    (2.9999999999, 3, 0),  # rounds up to a whole second: the carry goes into sec
    (1.5, 1, 500_000_000),
    (2 / 30, 0, 66_666_667),
    (1764512345.9999999999, 1764512346, 0),  # a wall-clock stamp
    (1764512345.25, 1764512345, 250_000_000),
])
def test_stamps_round_to_the_nearest_nanosecond_and_carry_into_seconds(seconds, sec, nanosec):
    for message in (messages.to_time(seconds), messages.to_duration(seconds)):
        assert (message.sec, message.nanosec) == (sec, nanosec)
    assert messages.seconds_of(messages.to_time(seconds)) == pytest.approx(seconds, abs=1e-9)
    negative = messages.to_duration(-0.25)  # a duration may be negative: sec -1, plus 0.75 s
    assert (negative.sec, negative.nanosec) == (-1, 750_000_000)
    with pytest.raises(ValueError, match="a time of nan s cannot be stamped"):
        messages.to_time(math.nan)


def test_scene_and_target_messages_are_read_with_their_stamps_or_refused():
    scene = messages.scene_markers([("cup", 0.4, 0.3, 0.5, 0.06, 0.03)], 5.0, 1)
    stamp, objects = messages.scene_objects(scene)
    assert stamp == pytest.approx(5.0)
    assert [(k, round(x, 6), round(y, 6), round(yaw, 6)) for k, x, y, yaw in objects] == [("cup", 0.4, 0.3, 0.5)]
    with pytest.raises(messages.MessageError, match="no markers"):
        messages.scene_objects(messages.MarkerArray())
    stamp, xy = messages.target_point(messages.point_message((0.5, 0.25), 10.0))
    assert stamp == pytest.approx(10.0) and xy.tolist() == [0.5, 0.25]
    elsewhere = messages.point_message((0.5, 0.25), 10.0)
    elsewhere.header.frame_id = "base_link"
    with pytest.raises(messages.MessageError, match="frame 'base_link'"):
        messages.target_point(elsewhere)
    with pytest.raises(messages.MessageError, match="NaN"):
        messages.target_point(messages.point_message((math.nan, 0.25), 10.0))


def test_the_graph_description_feeds_both_launchers():
    nodes = describe(policy="expert")
    assert [n.name for n in nodes] == ["act_sim", "act_scene_reader", "act_selector", "act_expert"]
    arguments = ros_arguments(nodes[0])
    assert arguments[:3] == ["--ros-args", "-r", "__node:=act_sim"]
    assert "cameras:=[front,wrist]" in arguments and "clock:=lockstep" in arguments
    default = describe()  # policy:=act with the shipped checkpoint
    assert [n.name for n in default] == ["act_sim", "act_scene_reader", "act_selector", "act_policy"]
    assert [n.name for n in describe(policy="expert", scene="sim")] == ["act_sim", "act_selector", "act_expert"]
    assert Path(default[3].parameters["checkpoint"]) == Path(shipped_checkpoint())
    assert (Path(shipped_checkpoint()) / "model.safetensors").is_file()
    with pytest.raises(ValueError, match="unknown launch arguments"):
        describe(polcy="act")
    placed = describe(policy="expert", namespace="bench_2")
    assert {n.namespace for n in placed} == {"/bench_2"} and all(("/clock", "clock") in n.remappings for n in placed)
    assert ros_arguments(placed[0])[3:5] == ["-r", "__ns:=/bench_2"]
    with pytest.raises(ValueError, match="namespace:='2nd' is not a ROS namespace"):
        describe(namespace="2nd")
    # the launch file's own graph and exit handlers: tests/test_launch.py, with ROS 2's launch package


def test_policy_act_without_a_checkpoint_says_the_install_ships_none(tmp_path, monkeypatch):
    from act_node import paths
    from act_node.settings import SHIPPED_MODEL

    monkeypatch.setattr(paths, "models_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match="policy:=act needs checkpoint:=<pretrained_model folder> \\(this install "
                                         f"ships no models/{SHIPPED_MODEL}\\)"):
        describe()
    assert [n.name for n in describe(policy="expert")][-1] == "act_expert"


def test_the_expert_graph_runs_an_episode_headless(tmp_path):
    env = {**os.environ, "ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + 1)}
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "--timeout", "240", "policy:=expert",
                             "episodes:=1", "image_height:=48", "image_width:=64", f"video_dir:={tmp_path}"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads((tmp_path / "episode1_seed0.json").read_text())
    assert outcome["success"] and outcome["held_ticks"] == 0
    assert (tmp_path / "episode1_seed0.mp4").stat().st_size > 1000
    from PIL import Image

    with Image.open(tmp_path / "episode1_seed0.png") as picture:  # the film's picture: each 48x64 camera drawn 8x
        assert picture.width >= 2 * 480


def run_expert_in_process(config, seed: int) -> dict:
    """The expert node's plan executed by the sim node's own stepping, in this process: what the graph should do."""
    from act_node.stepping import SimEpisodes
    from act_node.tabletop.planner import plan_for_scene, plan_window

    sim = SimEpisodes(config.replace(first_seed=seed, episodes=1))
    start = sim.start_episode()
    truth = sim.table.task.scene.target.xy
    sim.target_given(start.stamp_s, truth)
    objects = [(o.kind, o.position[0], o.position[1], o.yaw) for o in start.objects]
    plan = plan_for_scene(so101.to_lerobot(sim.joint_state()[0]), truth, sim.table.task.scene.request, objects,
                          config.fps)
    tick = None
    while tick is None or not tick.done:
        steps = sim.tick - sim.start_tick
        if steps % config.replan_ticks() == 0:
            sim.add_chunk(sim.now_s, so101.from_lerobot(plan_window(plan, steps, config.chunk_size)))
        tick = sim.step()
    sim.close()
    return vars(tick.result)


def test_the_expert_graph_matches_in_process_stepping_with_the_velocity_bound_on(tmp_path):
    """Two expert episodes through the ROS graph (sim, expert node; the sim publishes the true target) equal the
    same plan stepped in this process by the same SimEpisodes: successes, lengths, holds, clamps, rewards."""
    from act_node.config import GraphConfig

    env_vars = {**os.environ, "ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + 1)}
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "--timeout", "400", "policy:=expert",
                             "episodes:=2", "first_seed:=1", "image_height:=48", "image_width:=64",
                             "target_source:=truth", "record_video:=false", f"video_dir:={tmp_path}"],
                            capture_output=True, text=True, env=env_vars, timeout=500)
    assert result.returncode == 0, result.stderr[-2000:]
    config = GraphConfig(image_height=48, image_width=64, target_source="truth")
    assert config.max_velocity == so101.MAX_VELOCITY_RAD_S
    for episode, seed in ((1, 1), (2, 2)):
        over_ros = json.loads((tmp_path / f"episode{episode}_seed{seed}.json").read_text())
        local = run_expert_in_process(config, seed)
        assert over_ros["success"] and local["success"]
        for key in ("steps", "held_ticks", "clamped_ticks", "clamped_joints"):
            assert over_ros[key] == local[key], key
        assert over_ros["held_ticks"] == 0
        assert over_ros["sum_reward"] == pytest.approx(local["sum_reward"], abs=1e-4)
        assert over_ros["target_error_m"] == 0.0


def test_ros_and_in_process_evaluation_of_a_checkpoint_agree(tiny_checkpoint, tmp_path):
    """ACT through the policy node vs in-process; a 3-step checkpoint swings wildly, so the velocity bound is off
    on both sides (the expert test above runs with it on)."""
    from act_node.config import GraphConfig
    from act_node.evaluate import evaluate

    config = GraphConfig(policy="act", checkpoint=str(tiny_checkpoint), episodes=2, first_seed=1000, objects=2,
                         image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=30)
    local = evaluate(config, out=tmp_path / "local", videos=0)
    env = {**os.environ, "ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + 2)}
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "eval", "--ros", f"--policy.path={tiny_checkpoint}",
                             "--episodes=2", "--objects=2", "--height=48", "--width=64", "--max-steps=30",
                             f"--out={tmp_path / 'ros'}"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    over_ros = json.loads((tmp_path / "ros" / "report_ros.json").read_text())
    for a, b in zip(local["per_episode"], over_ros["per_episode"]):
        assert (a["seed"], a["success"], a["steps"]) == (b["seed"], b["success"], b["steps"])
        assert a["outcome"] == b["outcome"] and b["outcome"] is not None  # the graph's sim judges as in-process
        assert b["held_ticks"] == 0, "the sim held for want of an action: the two runs executed different commands"
        assert a["sum_reward"] == pytest.approx(b["sum_reward"], abs=1e-3)
        # the graph's result counts the chunks the policy node sent for the episode: its calls, as in-process
        assert b["policy_calls"] == a["policy_calls"] > 0, (a["policy_calls"], b["policy_calls"])
        assert b["mean_inference_s"] > 0


def test_the_policy_node_warns_when_the_sim_draws_with_another_renderer_than_its_checkpoint_saw(
        ros, tiny_checkpoint, capfd):
    node = make_policy_node(tiny_checkpoint)  # its dataset was drawn with TinyRenderer (PickObjectEnv's default)
    try:
        assert node.trained_renderer == "tiny"
        capfd.readouterr()
        node.on_episode((5.0, {"task": "pick up the cup", "renderer": "tiny"}))
        assert "the sim draws its cameras with" not in capfd.readouterr().err
        node.on_episode((6.0, {"task": "pick up the cup", "renderer": "egl"}))
        said = capfd.readouterr().err
        assert "the sim draws its cameras with 'egl', but this checkpoint was trained on images drawn with " \
               "'tiny'" in said and "renderer:=tiny" in said
        assert node.episode_start_s == 6.0  # a warning: the run goes on
    finally:
        node.destroy_node()


def test_the_policy_node_sends_the_chunk_again_when_the_observation_is_said_again(policy):
    """A lockstep sim says an observation again (every republish_s) only while it waits for the chunk: a chunk
    sent before the sim's subscription matched is lost, and the episode held for want of it."""
    node, probe = policy
    probe.chunks.clear()
    stamp = next(STAMPS)
    probe.observe(stamp)
    assert wait_for(lambda: len(probe.chunks) == 1), "no chunk"
    state = messages.joint_state_message(np.zeros(6), np.zeros(6), stamp)
    state.name = list(so101.JOINT_NAMES)
    probe.joints.publish(state)  # the joints of the answered observation, again
    assert wait_for(lambda: len(probe.chunks) == 2), "the chunk was not sent again"
    assert probe.chunks[1] == probe.chunks[0] and messages.seconds_of(probe.chunks[1].header.stamp) == stamp
