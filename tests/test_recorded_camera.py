"""The camera stand-in: a recorded video (here a LeRobotDataset's AV1 camera video, which OpenCV cannot decode)
played by the camera node at its fps and looped, at the size the checkpoint trained on it takes; a file that holds
no video refused at start naming it."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image

from act_node.nodes import messages
from act_node.nodes.messages import SENSOR
from act_node.recorded_camera import RecordedCamera


def dataset_video(dataset, camera: str = "front"):
    return next((dataset / "videos" / f"observation.images.{camera}").rglob("*.mp4"))


def test_a_recorded_video_plays_in_order_and_loops(tiny_dataset):
    import av

    path = dataset_video(tiny_dataset)
    with av.open(str(path)) as container:
        count = sum(1 for _ in container.decode(video=0))
    camera = RecordedCamera(path)
    frames = [camera.async_read() for _ in range(count + 2)]
    assert frames[0].shape == (48, 64, 3) and frames[0].dtype == np.uint8
    assert camera.loops == 1
    assert np.array_equal(frames[count], frames[0]) and np.array_equal(frames[count + 1], frames[1])
    assert not np.array_equal(frames[0], frames[count - 1])  # the expert moved the arm: the frames differ
    camera.disconnect()
    assert not camera.is_connected


def test_the_camera_node_publishes_a_recorded_video_in_order(ros, tiny_dataset, tiny_checkpoint, tmp_path):
    from act_node.nodes.camera_node import CameraNode

    images: list[tuple[float, np.ndarray]] = []

    class Listener(Node):
        def __init__(self):
            super().__init__("video_listener")
            self.create_subscription(Image, "/camera/front/image_raw", lambda m: images.append(
                (time.time(), messages.image_array(m))), SENSOR)

    listener = Listener()
    ros.add_node(listener)
    node = CameraNode(parameter_overrides=[Parameter("name", value="front"),
                                           Parameter("device", value=str(dataset_video(tiny_dataset))),
                                           Parameter("checkpoint", value=str(tiny_checkpoint)),
                                           Parameter("fps", value=30.0)])
    ros.add_node(node)
    try:
        assert wait_for(lambda: len(images) >= 10, 20.0), len(images)
        video = RecordedCamera(dataset_video(tiny_dataset))
        frames = [video.async_read() for _ in range(node.published + 1)]
        # each image is a frame of the video, in the video's order (an episode's still start repeats a frame)
        found = [next((k for k, f in enumerate(frames) if np.array_equal(f, image)), None) for _, image in images]
        assert None not in found and found == sorted(found) and found[-1] > found[0], found
    finally:
        retire(ros, listener, node)
    not_a_video = tmp_path / "notes.txt"
    not_a_video.write_text("not a video")
    with pytest.raises(ValueError, match="notes.txt is a file but no video PyAV can read"):
        CameraNode(parameter_overrides=[Parameter("device", value=str(not_a_video))])
