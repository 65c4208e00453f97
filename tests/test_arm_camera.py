"""The camera node over LeRobot's OpenCV camera, fed from a video file: frames at the checkpoint's size, a
different size refused with both sizes named, or resized when asked.

OpenCV reads a file as fast as it decodes and then stops, where a camera gives 30 frames a second forever:
the file is read through a real cv2.VideoCapture that is paced to 30 fps and loops (`PacedCapture`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image

from act_node.nodes.messages import SENSOR, image_array

SIZE = (48, 64)


class PacedCapture:
    """A real cv2.VideoCapture on a file, read at 30 fps and looping, like a webcam."""

    def __init__(self, source, backend=None):
        import cv2

        self.cv2 = cv2
        self.inner = REAL_CAPTURE[0](str(source))
        self.next_s = 0.0

    def read(self, *args):
        import time

        time.sleep(max(0.0, self.next_s - time.monotonic()))
        self.next_s = time.monotonic() + 1 / 30
        ok, frame = self.inner.read()
        if not ok:
            self.inner.set(self.cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = self.inner.read()
        if ok:  # the wall time this grab returned, and which frame it was (the streams' bright column)
            GRABS.append((time.time(), int(frame.mean(axis=(0, 2)).argmax())))
        return ok, frame

    def __getattr__(self, name):
        return getattr(self.inner, name)


REAL_CAPTURE: list = []
GRABS: list[tuple[float, int]] = []


@pytest.fixture(autouse=True)
def paced(monkeypatch):
    import cv2
    from lerobot.cameras.opencv import camera_opencv

    REAL_CAPTURE[:] = [cv2.VideoCapture]
    monkeypatch.setattr(camera_opencv.cv2, "VideoCapture", PacedCapture)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    import cv2

    path = tmp_path_factory.mktemp("video") / "front.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (SIZE[1], SIZE[0]))
    for k in range(120):
        frame = np.zeros((*SIZE, 3), np.uint8)
        frame[:, :, 2] = 200  # red in OpenCV's BGR
        frame[:, k % SIZE[1]] = 255
        writer.write(frame)
    writer.release()
    return path


def checkpoint(folder, size):
    folder.mkdir(parents=True, exist_ok=True)
    features = {"observation.images.front": {"type": "VISUAL", "shape": [3, *size]},
                "observation.state": {"type": "STATE", "shape": [6]}}
    (folder / "config.json").write_text(json.dumps({"type": "act", "input_features": features}))
    return folder


def camera_node(video, **parameters):
    from act_node.nodes.camera_node import CameraNode

    values = {"name": "front", "device": str(video), "fps": 30.0, **parameters}
    return CameraNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def collect(ros, node):
    probe = Node("camera_probe")
    images, infos = [], []
    probe.create_subscription(Image, "camera/front/image_raw", images.append, SENSOR)
    probe.create_subscription(CameraInfo, "camera/front/camera_info", infos.append, SENSOR)
    ros.add_node(node)
    ros.add_node(probe)
    try:
        assert wait_for(lambda: len(images) >= 3 and infos, 10.0), "no frames"
    finally:
        retire(ros, probe, node)
    return images, infos


def test_frames_at_the_checkpoints_size_are_published_rgb(ros, video, tmp_path):
    images, infos = collect(ros, camera_node(video, checkpoint=str(checkpoint(tmp_path / "ckpt", SIZE))))
    image = image_array(images[-1], expected=SIZE)
    assert image[..., 0].mean() > 150 and image[..., 2].mean() < 100, "RGB order (LeRobot converts from BGR)"
    assert infos[-1].height == SIZE[0] and infos[-1].width == SIZE[1]
    assert images[-1].header.frame_id == "front_optical"


def test_a_size_other_than_the_checkpoints_is_refused(video, tmp_path, ros):
    with pytest.raises(ValueError, match="gives 48x64 frames but the checkpoint was trained on 96x128"):
        camera_node(video, checkpoint=str(checkpoint(tmp_path / "ckpt", (96, 128))))


def test_or_resized_when_asked(ros, video, tmp_path):
    node = camera_node(video, checkpoint=str(checkpoint(tmp_path / "ckpt", (96, 128))), resize=True)
    images, infos = collect(ros, node)
    assert image_array(images[-1]).shape == (96, 128, 3)
    assert (infos[-1].height, infos[-1].width) == (96, 128)


def test_each_frame_goes_out_once_stamped_with_the_time_its_grab_returned(ros, tmp_path):
    """A stream at 25 fps read by LeRobot's OpenCV camera (through a real cv2.VideoCapture that notes when each grab
    returned), published on a 30 Hz timer: each frame once, stamped with its grab, not with the time the node's
    timer published it: a subscriber matches frames to joint states by these stamps."""
    from arm_helpers import StreamingCamera

    from act_node.nodes.messages import seconds_of

    stream = StreamingCamera(tmp_path / "front.mjpg", SIZE, fps=25.0)
    GRABS.clear()
    try:
        images, _ = collect(ros, camera_node(stream.path, fps=30.0))
    finally:
        stream.close()
    stamps = [seconds_of(image.header.stamp) for image in images]
    assert len(set(stamps)) == len(stamps), "a frame published twice"
    for image, stamp in zip(images, stamps):
        column = int(image_array(image).mean(axis=(0, 2)).argmax())
        grab = min((at for at, seen in GRABS if seen == column), key=lambda at: abs(at - stamp))
        assert abs(grab - stamp) < 0.002, f"stamped {stamp - grab:+.4f} s from its grab"
