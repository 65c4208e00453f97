"""Recording through the graph: the scripted expert drives the sim graph (`act-sim launch record:=DIR`), the
recorder node writes the dataset, and it equals `act-sim record`'s for the same seeds; a SIGTERM keeps every
finished episode; the dataset trains with `act-sim train` unchanged."""

import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import TINY_ACT, TINY_IMAGE
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from act_node import so101
from act_node.record import ACTION_CONTRACT, SEEDS_FILE, action_contract, record
from act_node.tabletop.env import PickObjectEnv

logging.getLogger("lerobot").setLevel(logging.ERROR)
SEEDS = (61001, 61002)  # seeds no other test uses
# the graph's defaults (the velocity bound included): act-sim record executes and records what the sim node does;
# the target from the sim's truth, act-sim record's default (the scene reader's own graph: tests/test_scene_cameras)
GRAPH = ["policy:=expert", "objects:=2", f"image_height:={TINY_IMAGE[0]}", f"image_width:={TINY_IMAGE[1]}",
         "renderer:=tiny", "scene:=sim"]


def launch(tmp_path, *arguments: str) -> subprocess.Popen:
    env = {**os.environ, "ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + 1)}
    log = open(tmp_path / "launch.log", "a")  # noqa: SIM115 (the child writes it)
    return subprocess.Popen([sys.executable, "-m", "act_node.cli", "launch", *GRAPH, *arguments], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def load(root) -> LeRobotDataset:
    return LeRobotDataset("local/test", root=root)


def deep(qos):
    """The graph's QoS with a recorder's queue: in lockstep the graph runs about 90 ticks a second, and this
    probe, a Python thread in the test's process, lost messages of 3 ticks in one run with the graph's depth."""
    from rclpy.qos import HistoryPolicy, QoSProfile

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=qos.reliability,
                      durability=qos.durability)


class BagProbe:
    """Writes the graph's topics into a rosbag2 bag with rosbags' writer, as `ros2 bag record` would: each
    message's serialized bytes with the time it came. Spins on a thread of its own in the graph's domain."""

    TOPICS = {"/act/joint_command": ("sensor_msgs/msg/JointState", "COMMANDS"),
              "/joint_states": ("sensor_msgs/msg/JointState", "RECORDING"),
              "/camera/front/image_raw": ("sensor_msgs/msg/Image", "RECORDING"),
              "/camera/wrist/image_raw": ("sensor_msgs/msg/Image", "RECORDING"),
              "/target/point": ("geometry_msgs/msg/PointStamped", "LATCHED"),
              "/episode/start": ("std_msgs/msg/Header", "LATCHED"),
              "/episode/result": ("std_msgs/msg/String", "RELIABLE")}
    STREAMS = ("/act/joint_command", "/joint_states", "/camera/front/image_raw", "/camera/wrist/image_raw")

    def __init__(self, path, storage: str):
        import threading

        import rclpy
        from geometry_msgs.msg import PointStamped
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Header, String

        from act_node.nodes import messages

        types = {"sensor_msgs/msg/JointState": JointState, "sensor_msgs/msg/Image": Image,
                 "geometry_msgs/msg/PointStamped": PointStamped, "std_msgs/msg/Header": Header,
                 "std_msgs/msg/String": String}
        typestore = get_typestore(Stores.ROS2_JAZZY)
        self.writer = Writer(path, version=9, storage_plugin=getattr(StoragePlugin, storage))
        self.writer.open()
        self.lock = threading.Lock()
        self.context = Context()
        rclpy.init(context=self.context, domain_id=int(os.environ["ROS_DOMAIN_ID"]) + 1,
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("bag_probe", context=self.context)
        # the sim's streams (awaited by the sim: the first episode starts once they are subscribed) only once the
        # selector's target publisher is discovered: under load that took seconds, and the latched target of the
        # first episode was gone by then (the bag held only the last one, and no complete frame)
        self.later = []
        for topic, (msgtype, qos) in self.TOPICS.items():
            connection = self.writer.add_connection(topic, msgtype, typestore=typestore)
            def subscribe(t=topic, m=msgtype, q=qos, c=connection):
                self.node.create_subscription(types[m], t, lambda data: self.write(c, data),
                                              deep(getattr(messages, q)), raw=True)

            if topic in self.STREAMS:
                self.later.append(subscribe)
            else:
                subscribe()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.running = True
        self.thread = threading.Thread(target=self.spin, daemon=True)
        self.thread.start()

    def write(self, connection, data: bytes) -> None:
        with self.lock:
            self.writer.write(connection, time.time_ns(), data)

    def spin(self) -> None:
        while self.running:
            if self.later and self.node.count_publishers("/target/point"):
                for subscribe in self.later:
                    subscribe()
                self.later = []
            self.executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=10)
        self.node.destroy_node()
        self.context.try_shutdown()
        with self.lock:
            self.writer.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(the graph's dataset, act-sim record's, the bag of the same graph run) for SEEDS."""
    folder = tmp_path_factory.mktemp("recorder")
    probe = BagProbe(folder / "bag", "MCAP")
    try:
        graph = launch(folder, f"episodes:={len(SEEDS)}", f"first_seed:={SEEDS[0]}", f"record:={folder / 'graph'}",
                       "repo_id:=local/test", "await_nodes:=bag_probe")  # the bag too hears episode 1 whole
        code = graph.wait(timeout=400)
    finally:
        probe.close()
    assert code == 0, (folder / "launch.log").read_text()[-3000:]
    env = PickObjectEnv(objects=2, image_size=TINY_IMAGE, renderer="tiny")
    record(env, "local/test", folder / "inproc", episodes=len(SEEDS), first_seed=SEEDS[0])
    env.close()
    return folder / "graph", folder / "inproc", folder / "bag"


def test_the_graph_recorded_through_the_recorder_node_equals_act_sim_record(recorded):
    graph, inproc = (load(root) for root in recorded[:2])
    assert graph.meta.features == inproc.meta.features and graph.meta.fps == inproc.meta.fps
    lengths = [[int(e["length"]) for e in d.meta.episodes] for d in (graph, inproc)]
    said = [line for line in (recorded[0].parent / "launch.log").read_text().splitlines() if "act_recorder" in line]
    assert lengths[0] == lengths[1] and graph.meta.total_episodes == len(SEEDS), said
    for key in ("observation.state", "action", "observation.environment_state"):
        difference = np.abs(np.asarray(graph.hf_dataset[key]) - np.asarray(inproc.hf_dataset[key]))
        assert difference.max() < 1e-3, (key, difference.max())
    # the action is the command sent: within the velocity bound from tick to tick, and the bound was reached
    action = so101.from_lerobot(np.asarray(inproc.hf_dataset["action"], dtype=np.float64))
    episode = np.asarray(inproc.hf_dataset["episode_index"])
    steps = np.abs(np.diff(action, axis=0))[episode[1:] == episode[:-1]]  # (ticks, 6) radians
    bound = so101.MAX_VELOCITY_RAD_S / inproc.meta.fps
    assert steps.max() <= bound + 1e-5 and np.isclose(steps.max(), bound, atol=1e-5), (steps.max(), bound)
    assert action_contract(recorded[0]) == action_contract(recorded[1]) == ACTION_CONTRACT == "sent"
    assert [graph[i]["task"] for i in (0, graph.meta.total_frames - 1)] == \
        [inproc[i]["task"] for i in (0, inproc.meta.total_frames - 1)]
    # the same frames rendered from the same state: what differs is the video codec's rounding
    for index in range(0, graph.meta.total_frames, 10):
        for camera in ("observation.images.front", "observation.images.wrist"):
            assert float((graph[index][camera] - inproc[index][camera]).abs().mean()) < 2 / 255, (index, camera)
    assert (recorded[0] / SEEDS_FILE).is_file()


def test_the_recorded_graph_trains_with_act_sim_train(recorded, tmp_path):
    from act_node.training import last_checkpoint, train

    train(recorded[0], "local/test", tmp_path / "run", steps=2, device="cpu", extra=TINY_ACT)
    assert last_checkpoint(tmp_path / "run") is not None


def test_a_sigterm_keeps_every_finished_episode_and_the_dataset_loads(tmp_path):
    root = tmp_path / "data"
    graph = launch(tmp_path, "episodes:=0", f"first_seed:={SEEDS[0]}", f"record:={root}", "repo_id:=local/test")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and "episode saved" not in (tmp_path / "launch.log").read_text():
            time.sleep(0.5)
        assert "episode saved" in (tmp_path / "launch.log").read_text()
        time.sleep(1.5)  # into the next episode
    finally:
        os.killpg(graph.pid, signal.SIGTERM)  # every process of the graph, as a supervisor would
        graph.wait(timeout=60)
    log = (tmp_path / "launch.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    dataset = load(root)
    assert dataset.meta.total_episodes >= 1
    assert len(dataset.hf_dataset) == dataset.meta.total_frames  # no half episode in the files


def test_a_bag_of_the_graph_converts_to_the_dataset_the_recorder_node_wrote(recorded, tmp_path):
    from act_node.bags import bag_to_dataset
    from act_node.recording import RecorderSettings

    summary = bag_to_dataset(recorded[2], RecorderSettings(tmp_path / "from_bag", "local/test"))
    assert summary.saved == len(SEEDS) and summary.unreadable == 0, summary
    node, bag = load(recorded[0]), load(tmp_path / "from_bag")
    assert bag.meta.features == node.meta.features
    assert [int(e["length"]) for e in bag.meta.episodes] == [int(e["length"]) for e in node.meta.episodes]
    for key in ("observation.state", "action", "observation.environment_state"):
        assert np.array_equal(np.asarray(bag.hf_dataset[key]), np.asarray(node.hf_dataset[key])), key
    for index in range(0, node.meta.total_frames, 10):
        assert bool((bag[index]["observation.images.wrist"] == node[index]["observation.images.wrist"]).all())


def test_time_ranges_cut_a_bag_without_episode_topics_into_episodes(recorded, tmp_path):
    from act_node.bags import bag_to_dataset
    from act_node.recording import RecorderSettings

    settings = RecorderSettings(tmp_path / "ranges", "local/test", use_target=False, robot_type="so101_follower")
    first = load(recorded[0])
    stamps = np.asarray(first.hf_dataset["timestamp"])
    length = int(first.meta.episodes[0]["length"])
    summary = bag_to_dataset(recorded[2], settings, ranges=[(0.0, 1.0)], task="pick up the cup")
    assert summary.saved == 1 and len(stamps) > length
    dataset = load(tmp_path / "ranges")
    assert dataset.meta.total_frames == 30 and dataset[0]["task"] == "pick up the cup"  # 1 s at 30 fps
    with pytest.raises(ValueError, match="need a task text"):
        bag_to_dataset(recorded[2], settings, ranges=[(0.0, 1.0)])


def test_launch_arguments_add_the_recorder_and_the_leader_to_either_graph():
    from act_node.nodes.graph import describe

    nodes = {n.name: n for n in describe(policy="expert", record="/tmp/d")}
    assert set(nodes) == {"act_sim", "act_scene_reader", "act_selector", "act_expert", "act_recorder"}
    assert nodes["act_sim"].parameters["camera_every"] == 1  # the recorder takes every tick's images
    assert nodes["act_sim"].parameters["await_subscriber"] == "act_recorder"
    assert nodes["act_recorder"].parameters["root"] == "/tmp/d" and nodes["act_recorder"].parameters["use_target"]

    nodes = {n.name: n for n in describe(teleop="leader", leader_port="/dev/leader")}
    assert set(nodes) == {"act_sim", "act_scene_reader", "act_selector", "act_leader"}, "no policy runs under teleop"
    assert nodes["act_sim"].parameters["command_source"] == "leader"
    assert nodes["act_sim"].parameters["clock"] == "realtime"
    with pytest.raises(ValueError, match="teleop:=leader needs clock:=realtime"):
        describe(teleop="leader", leader_port="/dev/leader", clock="lockstep")
    with pytest.raises(ValueError, match="needs leader_port"):
        describe(teleop="leader")

    nodes = {n.name: n for n in describe(robot="so101", port="/dev/follower", teleop="leader",
                                         leader_port="/dev/leader", record="/tmp/arm", task="pick up the cup")}
    assert set(nodes) == {"act_so101", "act_leader", "act_recorder"}
    assert nodes["act_so101"].parameters["command_source"] == "leader"
    recorder = nodes["act_recorder"].parameters
    assert recorder["robot_type"] == "so101_follower" and not recorder["use_target"] and recorder["task"]
