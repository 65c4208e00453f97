"""Camera node (`act_camera_node`): one camera through LeRobot's OpenCV camera (`lerobot.cameras.opencv`), as
`camera/<name>/image_raw` (sensor_msgs/Image rgb8) and `camera/<name>/camera_info`, each frame stamped with its
capture time: the wall time OpenCV's grab returned it, on LeRobot's read thread. The node publishes the frames
captured since its last tick on a timer of its own at `fps`, each frame once: the camera runs on its own clock, and a
subscriber matches frames to joint states by these stamps (act_node.observation.FrameBounds), not by when they
arrive.

Any other ROS camera driver (usb_cam, v4l2_camera) can stand in for it: remap its topics onto the policy
node's. With `checkpoint` set, the frame size must be the one the checkpoint was trained on for this camera:
a different size is refused at start with both sizes named, or resized when `resize` is true.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from act_node.checkpoints import checkpoint_cameras, checkpoint_layout
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import SENSOR, camera_info, serialized_image
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.observation import FrameAge
from act_node.table_frame import YAW_LAYOUTS, YAW_READER_CAMERAS, YAW_READER_IMAGE_SIZE

# frames kept for the timer to publish: a tick that comes late (a busy machine) publishes what it missed, in order
CAPTURED_FRAMES = 8
STALE_FRAME_MS = 500  # a newest frame older than this is no frame: the camera hangs (LeRobot's read_latest default)


def checkpoint_image_size(checkpoint: Path, camera: str) -> tuple[int, int]:
    """(H, W) the checkpoint's config.json gives `observation.images.<camera>` (for a checkpoint in the
    target_tool_yaw layouts that takes no image, the yaw reader's size for its cameras); ValueError naming what
    lacks."""
    cameras = checkpoint_cameras(checkpoint)  # ValueError naming the file when it cannot be read
    if not cameras and checkpoint_layout(checkpoint) in YAW_LAYOUTS:
        cameras = {name: YAW_READER_IMAGE_SIZE for name in YAW_READER_CAMERAS}
    if camera not in cameras:
        raise ValueError(f"checkpoint {checkpoint} has no camera {camera!r} (it has {sorted(cameras)})")
    return cameras[camera]




class Captured(np.ndarray):
    """A frame (H, W, 3) that carries `stamp_s`: the wall time its grab returned."""

    stamp_s: float = math.nan


WARMUP_S = 3  # seconds LeRobot's connect() reads frames for; its first frame must come within them


def capturing_camera(config):
    """LeRobot's OpenCVCamera whose read thread stamps each frame with the wall time the grab returned (LeRobot's
    own `latest_timestamp` is taken after the colour conversion, on the perf_counter clock)."""
    from lerobot.cameras.opencv import OpenCVCamera

    class CapturingCamera(OpenCVCamera):
        # the frames captured lately, newest last: the node publishes each once (LeRobot keeps only the newest)
        captured: deque[Captured] = deque(maxlen=CAPTURED_FRAMES)
        count = 0  # frames captured

        def _read_from_hardware(self):
            frame = super()._read_from_hardware()
            self._grabbed_s = time.time()
            return frame

        def _postprocess_image(self, image):
            # both on the read thread, one after the other: the stamp is this frame's grab
            frame = super()._postprocess_image(image).view(Captured)
            frame.stamp_s = self._grabbed_s
            self.captured.append(frame)
            self.count += 1
            return frame

    camera = CapturingCamera(config)
    camera.captured = deque(maxlen=CAPTURED_FRAMES)  # its own, not the class's
    return camera


class CameraNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_camera", **node_options)
        values = declare_node(self, "act_camera")
        self.name = values["name"]
        self.frame_id = f"{self.name}_optical"
        self.camera = self._open(values["device"], int(values["width"]), int(values["height"]), float(values["fps"]))
        frame = self.camera.async_read(timeout_ms=2000)
        height, width = frame.shape[:2]
        self.size = (height, width)
        if values["checkpoint"]:
            wanted = checkpoint_image_size(Path(values["checkpoint"]), self.name)
            if wanted != self.size and not values["resize"]:
                self.camera.disconnect()
                raise ValueError(f"camera {self.name!r} gives {height}x{width} frames but the checkpoint was trained "
                                 f"on {wanted[0]}x{wanted[1]}: set the camera's width/height, or resize:=true")
            self.size = wanted
        self.resize_from = (height, width) if self.size != (height, width) else None
        fov = np.radians(float(values["horizontal_fov_deg"]))  # no calibration: a pinhole with this field of view
        focal = self.size[1] / 2 / np.tan(fov / 2)
        self.intrinsics = np.array([[focal, 0, self.size[1] / 2], [0, focal, self.size[0] / 2], [0, 0, 1.0]])
        self.image_pub = self.create_publisher(Image, f"camera/{self.name}/image_raw", SENSOR)
        self.info_pub = self.create_publisher(CameraInfo, f"camera/{self.name}/camera_info", SENSOR)
        self.published = 0
        self.read_failures, self.last_error = 0, ""
        self.last_stamp_s = -math.inf  # the newest frame published: each is published once
        self.ages = FrameAge()  # how long after its grab each frame went out
        self.fps = float(values["fps"])
        self._window = (time.monotonic(), 0)  # wall time and frames at the last report
        self.diagnostics = Diagnostics(self, f"camera {self.name}", self.fill_diagnostics, str(values["device"]))
        self.create_timer(1.0 / float(values["fps"]), self.publish_frame)
        self.get_logger().info(f"camera {self.name!r} from {values['device']}: {height}x{width}"
                               + (f" resized to {self.size[0]}x{self.size[1]}" if self.resize_from else ""))

    def _open(self, device: str, width: int, height: int, fps: float):
        if Path(device).is_file():  # a recorded video stands in for a camera: played at fps, looped
            from act_node.recorded_camera import RecordedCamera

            return RecordedCamera(device)
        from lerobot.cameras.opencv import OpenCVCameraConfig

        source = int(device) if device.isdigit() else Path(device)
        # warmup_s: LeRobot waits this long for the first frame (its default, 1 s, was too short for a stream
        # opened while a launch started its other nodes on two cores; some USB cameras take as long)
        config = OpenCVCameraConfig(index_or_path=source, width=width or None, height=height or None,
                                    fps=None if not (width and height) else int(fps), warmup_s=WARMUP_S)
        camera = capturing_camera(config)
        try:
            camera.connect()
        except (ConnectionError, TimeoutError) as error:  # the runner says why in one line and exits 2
            raise ValueError(f"camera {device!r} gave no frame: {error}") from error
        return camera

    def publish_frame(self) -> None:
        """Every frame captured since the last tick (none, for a camera slower than fps; two, after a tick that
        came late), each once, stamped with its capture time."""
        if not hasattr(self.camera, "captured"):  # a recorded video: a frame is captured as it is read, now
            try:
                frame = self.camera.async_read(timeout_ms=200)
            except (TimeoutError, RuntimeError) as error:
                self._failed(error)
                return
            self._publish(frame, time.time())
            return
        try:
            self.camera.read_latest(max_age_ms=STALE_FRAME_MS)  # raises when the camera hangs or gave nothing yet
        except (TimeoutError, RuntimeError) as error:
            self._failed(error)
            return
        for frame in list(self.camera.captured):  # list(): the read thread appends meanwhile
            if frame.stamp_s > self.last_stamp_s:
                self.last_stamp_s = frame.stamp_s
                self._publish(frame, frame.stamp_s)

    def _failed(self, error: Exception) -> None:
        self.read_failures += 1
        self.last_error = str(error)
        self.get_logger().error(f"camera {self.name!r}: no frame: {error}", throttle_duration_sec=2.0)

    def _publish(self, frame: np.ndarray, stamp: float) -> None:
        """One frame out, stamped `stamp` (its capture, wall time)."""
        self.ages.add(time.time() - stamp)
        frame = np.asarray(frame)
        if self.resize_from is not None:
            import cv2

            frame = cv2.resize(frame, (self.size[1], self.size[0]), interpolation=cv2.INTER_AREA)
        self.image_pub.publish(serialized_image(frame, stamp, self.frame_id))  # bytes: no rclpy conversion
        self.info_pub.publish(camera_info(self.intrinsics, *self.size, stamp, self.frame_id))
        self.published += 1

    def fill_diagnostics(self, report: Report) -> None:
        now, (started, frames) = time.monotonic(), self._window
        rate = (self.published - frames) / max(now - started, 1e-6)
        self._window = (now, self.published)
        failed = self.diagnostics.recent("failures", self.read_failures)
        if rate == 0:
            report.error(f"no frame in the last {now - started:.1f} s: {self.last_error or 'no error said'}")
        elif failed:
            report.warn(f"{failed:g} failed reads recently: {self.last_error}")
        elif rate < 0.9 * self.fps:
            report.warn(f"publishing at {rate:.1f} Hz, below {self.fps:g} fps")
        captured = getattr(self.camera, "count", self.published)  # a recorded video: each frame read is published
        report.update({"frames_captured": captured, "frames_published": self.published, "rate_hz": f"{rate:.1f}",
                       "fps": f"{self.fps:g}",
                       "capture_to_publish_mean_ms": f"{self.ages.mean_s * 1e3:.1f}",
                       "capture_to_publish_max_ms": f"{self.ages.max_s * 1e3:.1f}",
                       "size": f"{self.size[0]}x{self.size[1]}", "resized": self.resize_from is not None,
                       "read_failures": self.read_failures, "last_error": self.last_error})

    def destroy_node(self) -> None:
        self.diagnostics.final()
        if self.camera.is_connected:
            self.camera.disconnect()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(CameraNode, "act_camera_node", args)


if __name__ == "__main__":
    main()
