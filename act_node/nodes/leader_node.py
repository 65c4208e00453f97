"""Leader arm node (`act_leader_node`): an SO-101 leader moved by hand, read over LeRobot's Feetech bus with
torque off, published for a follower (the sim node's or the arm node's `command_source:=leader`) and a recorder.

    read thread, fps on wall time:  read joints -> leader/joint_states (radians, stamped at the read,
                                    velocities from successive reads); a failed read publishes nothing
    executor thread:                /diagnostics once a second: reads, failures, measured rate, last error

The read loop is a thread of its own, as the arm node's bus loop is. The work lives in
act_node.arm.leader.SO101LeaderArm; this file is ROS only. It refuses to start (exit 2, every problem listed)
on an empty port, a missing or wrong calibration file, or a servo that does not answer; a servo that stops
answering later is logged and counted, and the messages resume when it answers again. On shutdown the port
closes (the leader's torque is off from the start).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState

from act_node.arm.interface import ArmError
from act_node.arm.leader import SO101LeaderArm
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import SENSOR, joint_state_message
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run

SLOW_RATE = 0.9  # a measured rate under this share of fps is a warning on /diagnostics


@dataclass
class LeaderStats:
    reads: int = 0  # completed reads, each published
    read_failures: int = 0
    failures_in_a_row: int = 0
    last_error: str = ""


class LeaderNode(Node):
    def __init__(self, leader: SO101LeaderArm | None = None, **node_options):
        """`leader`: an object with connect(), read() -> JointReading and close() to use instead of the
        SO-101 leader the parameters name (tests, other teleoperators)."""
        super().__init__("act_leader", **node_options)
        values = declare_node(self, "act_leader")
        self.fps = float(values["fps"])
        if leader is None:
            if not values["port"]:
                raise ValueError("parameter 'port' is empty: give the leader's serial port, e.g. /dev/ttyACM1")
            leader = SO101LeaderArm(values["port"], values["robot_id"], values["calibration_dir"] or None)
        self.leader = leader
        self.joint_pub = self.create_publisher(JointState, "leader/joint_states", SENSOR)
        self.diagnostics = Diagnostics(self, "SO-101 leader arm", self.fill_diagnostics,
                                       str(getattr(leader, "port", leader.__class__.__name__)), ok_message="reading")
        self.stats = LeaderStats()
        self._window = (time.monotonic(), 0, 0)  # (start, reads, failures) of the diagnostics' rate window
        self._previous: tuple[float, np.ndarray] | None = None
        self._stop = threading.Event()
        self._closed = False
        self._loop = threading.Thread(target=self.read_loop, name="leader-bus", daemon=True)
        self.leader.connect()  # ArmConfigurationError: the runner says why and exits 2
        try:
            self._loop.start()
        except BaseException:
            self.leader.close()
            raise
        self.get_logger().info(f"leader on {getattr(leader, 'port', '?')} with torque off, publishing "
                               f"leader/joint_states at {self.fps:g} fps")

    # --- the read loop (its own thread) --------------------------------------------------------------------
    def read_loop(self) -> None:
        period = 1.0 / self.fps
        due = time.monotonic()
        while not self._stop.is_set():
            delay = due - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            self.read_once()
            due += period
            if time.monotonic() - due > period:  # more than a read late: skip ahead rather than burst
                due = time.monotonic()

    def read_once(self) -> None:
        stats = self.stats
        try:
            reading = self.leader.read()
        except Exception as error:  # the loop outlives anything a driver raises, and says what it was
            text = str(error) if isinstance(error, ArmError) else f"{type(error).__name__} from the driver: {error}"
            stats.read_failures += 1
            stats.failures_in_a_row += 1
            stats.last_error = text
            self.get_logger().error(f"leader read failed, nothing published: {text}", throttle_duration_sec=1.0)
            return
        if stats.failures_in_a_row:
            self.get_logger().info(f"leader answers again after {stats.failures_in_a_row} failed reads")
            stats.failures_in_a_row = 0
        self.publish_joints(reading.positions, reading.stamp_s)
        stats.reads += 1

    def publish_joints(self, positions: np.ndarray, stamp_s: float) -> None:
        velocities = np.zeros_like(positions)
        if self._previous is not None and stamp_s > self._previous[0]:
            velocities = (positions - self._previous[1]) / (stamp_s - self._previous[0])
        self._previous = (stamp_s, positions)
        self.joint_pub.publish(joint_state_message(positions, velocities, stamp_s))

    # --- diagnostics (executor thread) ---------------------------------------------------------------------
    def fill_diagnostics(self, report: Report) -> None:
        stats, now = self.stats, time.monotonic()
        started, reads, failures = self._window
        rate = (stats.reads - reads) / max(now - started, 1e-6)
        failed_now = stats.read_failures - failures
        self._window = (now, stats.reads, stats.read_failures)
        if stats.failures_in_a_row:
            report.error(f"not answering: {stats.last_error}")
        elif failed_now:
            report.warn(f"{failed_now} failed reads in the last second")
        elif rate < SLOW_RATE * self.fps:
            report.warn(f"reading at {rate:.1f} Hz, below {self.fps:g} fps")
        report.update({"reads": stats.reads, "read_failures": stats.read_failures,
                       "failures_in_a_row": stats.failures_in_a_row, "rate_hz": f"{rate:.1f}",
                       "fps": f"{self.fps:g}", "last_error": stats.last_error})

    # --- shutdown ------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the read loop and close the port. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._loop.ident is not None:  # started
            self._loop.join(timeout=5.0)  # a read on a silent servo lasts LeRobot's sync-read timeout per try
        self.leader.close()
        print("act_leader: port closed", flush=True)  # the logger may be gone during a launch shutdown

    def destroy_node(self) -> None:
        self.diagnostics.final()
        self.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(LeaderNode, "act_leader_node", args)


if __name__ == "__main__":
    main()
