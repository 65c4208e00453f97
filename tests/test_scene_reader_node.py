"""The scene reader node over real rclpy: when it reads, what it publishes on scene/objects, what it refuses, and
what /diagnostics says of a silent camera. Each test runs in a namespace of its own (the ROS domain is shared)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from act_node.nodes import messages
from act_node.nodes.diagnostics import ERROR, Report
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR
from act_node.perception.scene import CameraCalibration, ReaderConfig, SceneReader, SeenObject, network
from act_node.table_frame import KIND_NAMES, TABLE_FRAME


@pytest.fixture(scope="module")
def eager_reader(tmp_path_factory):
    """An untrained reader's folder: what the node loads (the tests then read through PlacedReader)."""
    folder = tmp_path_factory.mktemp("reader")
    SceneReader(network(8), ReaderConfig(width=8, threshold=0.0)).save(folder)
    return folder


class PlacedReader:
    """Reads every kind at a place of its own whatever the frame shows: the node's plumbing, not the network."""

    def __init__(self, config):
        self.config = config
        self.calibrations = []

    def read(self, image, calibration=None):
        self.calibrations.append(calibration)
        return [SeenObject(kind, 0.3 + 0.05 * i, 0.1 + 0.02 * i, 0.1 * i, 0.9, 10.0, 20.0)
                for i, kind in enumerate(KIND_NAMES)]


def start(ros, namespace: str, model, **parameters):
    from act_node.nodes.scene_reader_node import SceneReaderNode

    node = SceneReaderNode(namespace=namespace, parameter_overrides=[
        Parameter("model", value=str(model)), *(Parameter(k, value=v) for k, v in parameters.items())])
    node.reader = PlacedReader(node.reader.config)
    probe = Node("scene_probe", namespace=namespace)
    scenes: list[MarkerArray] = []
    probe.create_subscription(MarkerArray, "scene/objects", scenes.append, LATCHED)
    publishers = {"image": probe.create_publisher(Image, "camera/front/image_raw", SENSOR),
                  "info": probe.create_publisher(CameraInfo, "camera/front/camera_info", SENSOR),
                  "start": probe.create_publisher(messages.Header, "episode/start", LATCHED),
                  "request": probe.create_publisher(String, "target/request", RELIABLE)}
    ros.add_node(node)
    ros.add_node(probe)
    assert wait_for(lambda: probe.count_subscribers(f"{namespace}/camera/front/image_raw") > 0)
    return node, probe, publishers, scenes


def frame(stamp_s: float, encoding: str = "rgb8") -> Image:
    image = messages.image_message(np.full((96, 128, 3), 90, np.uint8), stamp_s, "front_optical")
    image.encoding = encoding
    return image


def test_it_reads_the_first_frame_at_or_after_an_episode_start_and_publishes_the_scene_contract(ros, eager_reader):
    node, probe, pub, scenes = start(ros, "/scene_reader_t1", eager_reader)
    try:
        pub["image"].publish(frame(4.0))  # nobody asked yet: not read
        assert wait_for(lambda: node.counts["frames"] >= 1)
        pub["start"].publish(messages.episode_start_message(5.0, {"task": "pick up the cup", "episode": 3}))
        assert wait_for(lambda: node.counts["asks"] >= 1)
        pub["image"].publish(frame(4.9))  # older than the ask: not read
        assert wait_for(lambda: node.counts["frames"] >= 2)
        assert not scenes and node.counts["read"] == 0
        pub["image"].publish(frame(5.0))
        assert wait_for(lambda: scenes), "no scene/objects after the episode's first frame"
        markers = scenes[-1].markers
        assert [m.text for m in markers] == list(KIND_NAMES)
        np.testing.assert_allclose([(m.pose.position.x, m.pose.position.y) for m in markers],
                                   [(0.3 + 0.05 * i, 0.1 + 0.02 * i) for i in range(len(KIND_NAMES))])
        assert all(m.header.frame_id == TABLE_FRAME and messages.seconds_of(m.header.stamp) == 5.0 for m in markers)
        assert all(m.ns == "episode_3" and m.action == Marker.ADD for m in markers)
        stamp, objects = messages.scene_objects(scenes[-1])  # what the selector parses
        assert stamp == 5.0 and len(objects) == len(KIND_NAMES)
        pub["image"].publish(frame(5.1))  # one reading per ask
        assert wait_for(lambda: node.counts["frames"] >= 4)
        assert node.counts["read"] == 1 and len(scenes) == 1
    finally:
        retire(ros, node, probe)


def test_an_unreadable_frame_publishes_nothing_and_the_node_reads_the_next(ros, eager_reader):
    node, probe, pub, scenes = start(ros, "/scene_reader_t2", eager_reader, read_on="every", period_s=0.0)
    try:
        pub["image"].publish(frame(1.0, encoding="mono16"))
        assert wait_for(lambda: node.counts["unreadable"] == 1)
        assert not scenes
        pub["image"].publish(frame(1.1))
        assert wait_for(lambda: scenes)
        assert messages.seconds_of(scenes[-1].markers[0].header.stamp) == pytest.approx(1.1)
    finally:
        retire(ros, node, probe)


def test_camera_info_gives_the_intrinsics_and_a_bad_one_is_ignored(ros, eager_reader):
    node, probe, pub, _ = start(ros, "/scene_reader_t3", eager_reader)
    try:
        k = CameraCalibration.of_sim(480, 640).intrinsics
        pub["info"].publish(messages.camera_info(np.zeros((3, 3)), 480, 640, 1.0, "front_optical"))
        pub["info"].publish(messages.camera_info(k, 480, 640, 1.0, "front_optical"))
        assert wait_for(lambda: node.intrinsics is not None)
        np.testing.assert_allclose(node.calibration_for((96, 128)).intrinsics,
                                   CameraCalibration.of_sim(96, 128).intrinsics)
    finally:
        retire(ros, node, probe)


def test_a_silent_camera_with_a_reading_owed_is_an_error_on_diagnostics(ros, eager_reader):
    node, probe, pub, _ = start(ros, "/scene_reader_t4", eager_reader, silent_after_s=0.1)
    try:
        pub["request"].publish(String(data="cup"))
        assert wait_for(lambda: node.counts["asks"] == 1)
        report = Report()
        node.fill_diagnostics(report)
        assert report.level == ERROR and "camera/front/image_raw is silent: a reading is owed" in report.message
    finally:
        retire(ros, node, probe)


def test_a_missing_calibration_file_refuses_the_node_by_name(ros, eager_reader, tmp_path):
    from act_node.nodes.scene_reader_node import SceneReaderNode

    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        SceneReaderNode(namespace="/scene_reader_t5", parameter_overrides=[
            Parameter("model", value=str(eager_reader)),
            Parameter("calibration", value=str(tmp_path / "nowhere.json"))])
