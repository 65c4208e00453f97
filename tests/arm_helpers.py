"""Shared pieces of the arm tests: a simulated bus with a calibration file, the real driver on it, a loop at
the real tick rate, the invariants every logged Goal_Position write must keep, and cameras that stream on their
own clocks."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np

from act_node.arm.calibration import Calibration, so101_calibration
from act_node.arm.control import ArmController
from act_node.arm.follower import SO101FollowerArm
from act_node.arm.safety import SafetyConfig
from act_node.arm.servo_sim import SimulatedBus, WriteRecord

ROBOT_ID = "sim_follower"
# a pose inside every range, as an arm resting on the table might be
START_RAD = np.array([0.1, -0.6, 0.5, 0.9, -0.2, 0.3])
# homing offsets as lerobot-calibrate leaves them: different per servo, some negative
HOMING = {"shoulder_pan": -512, "shoulder_lift": 731, "elbow_flex": -1020, "wrist_flex": 95, "wrist_roll": 0,
          "gripper": 1400}
TICKS_PER_RAD = 4095 / (2 * np.pi)


def calibration() -> Calibration:
    return so101_calibration(HOMING)


def write_calibration(folder: Path, cal: Calibration | None = None) -> Path:
    path = folder / f"{ROBOT_ID}.json"
    (cal or calibration()).save(path)
    return path


def follower(bus: SimulatedBus, folder: Path, **options) -> SO101FollowerArm:
    return SO101FollowerArm(bus.port, ROBOT_ID, folder, **options)


def controller(bus: SimulatedBus, folder: Path, config: SafetyConfig | None = None, **options) -> ArmController:
    return ArmController(follower(bus, folder), config or SafetyConfig(), **options)


def run_ticks(control: ArmController, seconds: float, on_tick=None) -> list:
    """Tick at the controller's rate on wall time for `seconds`; `on_tick(k, now)` runs before each tick."""
    results = []
    start = time.time()
    for k in range(int(round(seconds * control.fps))):
        due = start + k / control.fps
        time.sleep(max(0.0, due - time.time()))
        now = time.time()
        if on_tick is not None:
            on_tick(k, now)
        results.append(control.tick(now))
    return results


def goal_writes(bus: SimulatedBus, after_s: float = -np.inf) -> list[WriteRecord]:
    return [w for w in bus.goal_writes() if w.time_s > after_s]


def check_goal_writes(bus: SimulatedBus, config: SafetyConfig, after_s: float = -np.inf) -> int:
    """Assert the invariants on every Goal_Position write the bus logged; returns how many were checked.

    - within the servo's raw position limits (Min/Max_Position_Limit)
    - change from the servo's previous goal within max_velocity / fps, unless the goal is the present
      position (activation's seed and stop's freeze command no motion)
    - distance from the present position within max_from_measured, plus what the arm can move between the
      tick's read and the write's arrival (10 ms at the servo's no-load speed)
    """
    step = config.max_step_rad * TICKS_PER_RAD + 2  # LeRobot truncates degrees to ticks: 1-2 ticks of rounding
    reach = (config.max_from_measured_rad + 4.7 * 0.010) * TICKS_PER_RAD + 2
    previous: dict[int, int] = {}
    writes = goal_writes(bus, after_s)
    for w in writes:
        low = bus.register(w.servo_id, "Min_Position_Limit")
        high = bus.register(w.servo_id, "Max_Position_Limit")
        assert low <= w.value <= high, f"servo {w.servo_id}: goal {w.value} outside raw limits [{low}, {high}]"
        freeze = abs(w.value - w.present_ticks) <= 2
        if w.servo_id in previous and not freeze:
            change = abs(w.value - previous[w.servo_id])
            assert change <= step, f"servo {w.servo_id}: goal moved {change} ticks in one tick (bound {step:.0f})"
        assert abs(w.value - w.present_ticks) <= reach, (
            f"servo {w.servo_id}: goal {w.value} is {abs(w.value - w.present_ticks)} ticks from present "
            f"{w.present_ticks} (bound {reach:.0f})")
        previous[w.servo_id] = w.value
    return len(writes)


class StreamingCamera:
    """A camera that streams for as long as the test runs, as an IP camera does: multipart JPEG (what ffmpeg's
    mpjpeg demuxer reads, through LeRobot's OpenCV camera) written into a named pipe at `fps` on a clock of its own
    (time.monotonic from when the camera was made, `phase_s` into its first period: never the bus's tick), the
    pipe opened again for each new reader (a respawned camera node). A video file would not do: OpenCV reads a
    file as fast as it decodes and then stops. `written` counts the frames written."""

    def __init__(self, path, size: tuple[int, int], fps: float = 30.0, phase_s: float = 0.0):
        os.mkfifo(path)
        self.path, self.size, self.fps = path, size, fps
        self.readers = 0
        self.written = 0
        self._origin = time.monotonic() + phase_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"camera {path.name}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import cv2

        k = 0
        while not self._stop.is_set():
            try:
                with open(self.path, "wb") as pipe:  # blocks until a camera node opens the pipe
                    self.readers += 1
                    while not self._stop.is_set():
                        frame = np.full((*self.size, 3), 90, np.uint8)
                        frame[:, k % self.size[1]] = 255
                        jpeg = cv2.imencode(".jpg", frame)[1].tobytes()
                        # the camera's own clock: frame k of the stream is due at origin + k / fps
                        k = max(k + 1, int(np.ceil((time.monotonic() - self._origin) * self.fps)))
                        time.sleep(max(0.0, self._origin + k / self.fps - time.monotonic()))
                        pipe.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(jpeg)
                                   + jpeg + b"\r\n")
                        pipe.flush()
                        self.written += 1
            except (BrokenPipeError, OSError):  # the reader went away (killed): wait for the next one
                continue

    def close(self) -> None:
        self._stop.set()
        try:  # a writer blocked in open() waits for a reader: give it one that leaves at once
            os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
        self._thread.join(5.0)
