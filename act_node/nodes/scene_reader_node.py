"""Scene reader node: the front camera's frames -> scene/objects, what is on the table as the camera shows it.

The same contract as the sim node's truth (a MarkerArray in `table`, one marker per kind seen, the kind in
`text`, stamped with the frame it was read from; a table with nothing seen is one DELETEALL marker), so the
selector node cannot tell which it reads. How sure the reader is of each kind is the marker's colour alpha.

When it reads (read_on):
  request  each episode/start and each target/request asks for one reading: of the first frame stamped at or
           after the ask (in the sim the episode's first frame, before anything moved; on the arm the next frame)
  every    each frame, at most one each period_s

Pixels become table coordinates through the camera's calibration (act_node.perception.scene.CameraCalibration):
the intrinsics from camera_info (or the calibration file's, before a camera_info came), the camera's pose in
`table` from the calibration file (act-sim calibrate writes it; empty: the sim's front camera as placed). A frame
it cannot read (an encoding or size it does not know) is logged and nothing is published from it; a silent camera
and an ask still waiting for a frame are reported on /diagnostics.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import ColorRGBA, Header, String
from visualization_msgs.msg import Marker, MarkerArray

from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    SENSOR,
    MessageError,
    episode_start,
    header,
    image_array,
    image_stamp,
    parsed,
    scene_markers,
    sent_at,
)
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.perception.scene import HALF_HEIGHT_M, CameraCalibration, SceneReader
from act_node.table_frame import TABLE_FRAME
from act_node.tabletop.objects import KINDS


class SceneReaderNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_scene_reader", **node_options)  # e.g. parameter_overrides, for tests
        values = declare_node(self, "act_scene_reader")
        self.values = values
        self.reader = SceneReader.load(values["model"] or None, threads=values["threads"] or None)
        self.calibration = CameraCalibration.load(values["calibration"]) if values["calibration"] else None
        self.intrinsics: tuple[np.ndarray, tuple[int, int]] | None = None  # K and its size, from camera_info
        self.asked_s: float | None = None  # the stamp a reading is owed from (read_on request)
        self.last_read_s = float("-inf")
        self.last_frame_wall = None
        self.episode = 0
        self.counts: Counter = Counter()  # frames, read, unreadable, asks
        self.last_seen: list[str] = []
        self.read_s = 0.0
        camera = values["camera"]
        self.scene_pub = self.create_publisher(MarkerArray, "scene/objects", LATCHED)
        self.create_subscription(Image, f"camera/{camera}/image_raw", self.on_image, SENSOR)
        self.create_subscription(CameraInfo, f"camera/{camera}/camera_info", self.on_info, SENSOR)
        self.create_subscription(Header, "episode/start",
                                 parsed(self, episode_start, "episode start", self.on_episode), LATCHED)
        self.create_subscription(String, "target/request", self.on_request, RELIABLE)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)
        if values["read_at_start"]:
            self.asked_s = float("-inf")
        self.diagnostics = Diagnostics(self, "scene reader", self.fill_diagnostics)
        when = ("at each episode start, target request and run" if values["read_on"] == "request"
                else f"every {values['period_s']:g} s")
        self.get_logger().info(f"scene reader {values['model'] or 'models/scene_reader'} on camera/{camera}/image_raw "
                               f"({self.reader.config.image_size[0]}x{self.reader.config.image_size[1]}), "
                               f"calibration {values['calibration'] or 'the sim camera as placed'}: reads {when}")

    # --- asks ------------------------------------------------------------------------------------------
    def on_episode(self, start: tuple[float, dict]) -> None:
        self.episode = int(start[1].get("episode", self.episode + 1))
        self.ask(start[0])

    def on_request(self, _message: String) -> None:
        self.ask(self.get_clock().now().nanoseconds * 1e-9)

    def on_run(self, message: String, info) -> None:  # info: rclpy's MessageInfo (the source timestamp)
        if message.data.strip():  # a run's task: read the table it starts on (an empty one ends the run)
            self.ask(sent_at(self, info))

    def ask(self, stamp_s: float) -> None:
        self.counts["asks"] += 1
        self.asked_s = stamp_s if self.asked_s is None else min(self.asked_s, stamp_s)

    # --- frames ----------------------------------------------------------------------------------------
    def on_info(self, message: CameraInfo) -> None:
        k = np.array(message.k, dtype=np.float64).reshape(3, 3)
        if message.height and message.width and np.all(np.isfinite(k)) and k[0, 0] > 0 and k[1, 1] > 0:
            self.intrinsics = (k, (int(message.height), int(message.width)))
        else:
            self.get_logger().warn(f"camera_info without a usable K ({list(message.k)}, {message.height}x"
                                   f"{message.width}): ignored", throttle_duration_sec=5.0)

    def on_image(self, message: Image) -> None:
        self.counts["frames"] += 1
        self.last_frame_wall = time.monotonic()
        stamp = image_stamp(message)
        if self.values["read_on"] == "request":
            if self.asked_s is None or stamp < self.asked_s - 1e-6:
                return
        elif stamp - self.last_read_s < self.values["period_s"] - 1e-9:
            return
        try:
            image = image_array(message)
            calibration = self.calibration_for(image.shape[:2])
        except (MessageError, ValueError) as error:
            self.counts["unreadable"] += 1
            self.get_logger().error(f"cannot read the frame stamped {stamp:.3f}: {error}", throttle_duration_sec=2.0)
            return
        trained = tuple(self.reader.config.image_size)
        if image.shape[0] < trained[0] or image.shape[1] < trained[1]:
            self.get_logger().warn(f"front frames of {image.shape[0]}x{image.shape[1]}, smaller than the "
                                   f"{trained[0]}x{trained[1]} the reader was trained on: enlarged, they read worse "
                                   "(image_height/image_width, or the camera's own size)", once=True)
        started = time.perf_counter()
        seen = self.reader.read(image, calibration)
        self.read_s = time.perf_counter() - started
        self.asked_s, self.last_read_s = None, stamp
        self.counts["read"] += 1
        self.last_seen = [f"{o.kind} {o.score:.2f}" for o in seen]
        self.scene_pub.publish(self.markers(seen, stamp))

    def calibration_for(self, size: tuple[int, int]) -> CameraCalibration:
        """The calibration at this frame's size: the file's pose (or the sim camera's) with camera_info's K."""
        base = self.calibration or CameraCalibration.of_sim(*size, self.values["camera"])
        if self.intrinsics is not None:
            k, (height, width) = self.intrinsics
            base = CameraCalibration(k, base.position, base.rotation, (height, width))
        return base.scaled(*size)

    def markers(self, seen, stamp_s: float) -> MarkerArray:
        if not seen:
            return MarkerArray(markers=[Marker(header=header(stamp_s, TABLE_FRAME), ns=f"episode_{self.episode}",
                                               action=Marker.DELETEALL)])
        array = scene_markers([(o.kind, o.x, o.y, o.yaw, 2 * HALF_HEIGHT_M[o.kind], KINDS[o.kind].footprint_m)
                               for o in seen], stamp_s, self.episode)
        for marker, o in zip(array.markers, seen):
            marker.color = ColorRGBA(r=0.1, g=0.75, b=0.85, a=float(np.clip(o.score, 0.05, 1.0)))
        return array

    def fill_diagnostics(self, report: Report) -> None:
        silent = self.last_frame_wall is None or time.monotonic() - self.last_frame_wall > self.values[
            "silent_after_s"]
        camera = self.values["camera"]
        if silent:
            (report.error if self.asked_s is not None else report.warn)(
                f"camera/{camera}/image_raw is silent" + (": a reading is owed" if self.asked_s is not None else ""))
        elif self.asked_s is not None:
            report.warn(f"waiting for a frame of camera/{camera} stamped after {self.asked_s:.3f}")
        if self.counts["unreadable"]:
            report.warn(f"{self.counts['unreadable']} frames could not be read")
        report.update({"counts": self.counts, "last_seen": ", ".join(self.last_seen) or "nothing",
                       "read_ms": round(1000 * self.read_s, 1),
                       "calibration": self.values["calibration"] or "the sim's camera as placed",
                       "camera_info": "yes" if self.intrinsics is not None else "not yet"})

    def destroy_node(self) -> None:
        self.diagnostics.final()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(SceneReaderNode, "act_scene_reader_node", args)


if __name__ == "__main__":
    main()
