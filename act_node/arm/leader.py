"""An SO-101 leader arm (the one a person moves by hand): LeRobot 0.6.1's `SO101Leader` (config type
`so101_leader`, `use_degrees=True`) over its FeetechMotorsBus, with the calibration file
`<calibration_dir>/<robot_id>.json` that `lerobot-calibrate --teleop.type=so101_leader` wrote.

    connect()   open the port, check every servo, the calibration file and the units (ArmConfigurationError,
                every problem listed), then LeRobot's own configure(): torque off, its motor settings
    read()      JointReading: positions (6,) radians in so101.JOINT_NAMES order, stamped in the middle of the
                read; ArmReadError naming the cause (and the servos that stopped answering) when it fails
    close()     close the port; never raises

Where LeRobot's leader lifecycle does not fit a node, this class does the step itself, as follower.py does:
- `SOLeader.connect()` asks on stdin whether to recalibrate when the file is missing or disagrees with the
  servos; a node has no stdin, so connect() refuses instead and says which file and which register.
- `SOLeader.disconnect()` writes torque off again and stops at the first servo that does not answer,
  leaving the port open; this class never enables torque, so close() only closes the port.
Reads are LeRobot's own `get_action()` (degrees for the body, 0..100 for the gripper, LeRobot's clamp included),
turned into radians by act_node.so101.from_lerobot: the one conversion.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from act_node import so101
from act_node.arm.bus_checks import (
    BUS_ERRORS,
    WritesFailed,
    calibration_mismatches,
    drop_input,
    one_line,
    servo_problems,
    until_written,
    wait_in_kernel,
)
from act_node.arm.calibration import Calibration, CalibrationError
from act_node.arm.follower import UNITS
from act_node.arm.interface import ArmConfigurationError, ArmReadError, JointReading

# the calibration file's fields and the registers that hold them on each servo
# what a bus transaction raises when the line fails: the port (OSError, pyserial's SerialException), LeRobot
# (ConnectionError), and the Feetech SDK indexing a reply cut short (IndexError, seen after a servo went silent)


def default_calibration_dir() -> Path:
    """Where lerobot-calibrate writes an SO leader's file: <HF_LEROBOT_CALIBRATION>/teleoperators/so_leader."""
    from lerobot.teleoperators.so_leader import SO101Leader
    from lerobot.utils.constants import HF_LEROBOT_CALIBRATION, TELEOPERATORS

    return HF_LEROBOT_CALIBRATION / TELEOPERATORS / SO101Leader.name


class SO101LeaderArm:
    def __init__(self, port: str, robot_id: str = "leader", calibration_dir: str | Path | None = None,
                 units: str = "degrees", read_retries: int = 1):
        """`read_retries`: extra sync reads after a failed one (a corrupt reply retries at once; a silent
        servo costs LeRobot's reply timeout per try, then a ping of each servo to name the silent one)."""
        self.port, self.robot_id = port, robot_id
        self.calibration_dir = Path(calibration_dir).expanduser() if calibration_dir else default_calibration_dir()
        self.calibration_path = self.calibration_dir / f"{robot_id}.json"
        self.units = units
        self.read_retries = read_retries
        self.leader = None  # LeRobot's SO101Leader once connect() has built it
        self.calibration: Calibration | None = None

    @property
    def bus(self):
        return self.leader.bus

    @property
    def is_connected(self) -> bool:
        return self.leader is not None and self.bus.is_connected

    # --- lifecycle -----------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Open the port, check everything, turn torque off; ArmConfigurationError lists every problem."""
        from lerobot.teleoperators.so_leader import SO101Leader, SO101LeaderConfig

        problems = []
        if self.units not in UNITS:
            problems.append(f"units {self.units!r} unknown: expected one of {UNITS}")
        elif self.units != "degrees":
            problems.append(f"the leader is asked for {self.units!r} units but it runs LeRobot's SO leader with "
                            f"use_degrees=True (degrees, gripper 0..100), the units act_node.so101 converts to "
                            f"radians; -100..100 would be read as degrees and move a follower to the wrong place")
        try:
            self.calibration = Calibration.load(self.calibration_path)
        except CalibrationError as error:
            problems.append(str(error))
        config = SO101LeaderConfig(port=self.port, id=self.robot_id, calibration_dir=self.calibration_dir,
                                   use_degrees=True, num_read_retries=self.read_retries)
        try:
            self.leader = SO101Leader(config)  # loads the calibration file when it exists
        except Exception as error:  # a file LeRobot's own loader (draccus) cannot parse
            if self.calibration is None:
                raise ArmConfigurationError(problems) from None
            raise ArmConfigurationError([*problems, f"LeRobot cannot load {self.calibration_path}: "
                                                    f"{one_line(error)}"]) from None
        problems += self._unit_mismatches()
        try:
            self.bus.connect(handshake=False)  # the port only: the checks below list every problem at once
        except (ConnectionError, OSError) as error:
            raise ArmConfigurationError([*problems, f"cannot open port {self.port}: {one_line(error)}"]) from None
        wait_in_kernel(self.bus.port_handler)
        answering = servo_problems(self.bus, self.port, problems)
        if self.calibration is not None:
            problems += calibration_mismatches(
                self.bus, self.calibration, self.calibration_path, answering,
                f"lerobot-calibrate --teleop.type=so101_leader --teleop.port={self.port} --teleop.id={self.robot_id} "
                f"--teleop.calibration_dir={self.calibration_path.parent}, then ENTER writes the file's values to the "
                f"servos, 'c' calibrates anew")
        if problems:
            self.close()
            raise ArmConfigurationError(problems)
        try:  # torque off (a leader is moved by hand), LeRobot's motor settings: idempotent, retried
            until_written(self.leader.configure, self.bus.port_handler, (*BUS_ERRORS, RuntimeError))
        except WritesFailed as failed:
            self.close()
            raise ArmConfigurationError([f"turning torque off and writing the leader's motor settings {failed}"]) \
                from None

    def _unit_mismatches(self) -> list[str]:
        """LeRobot's norm modes as so101.from_lerobot expects them: degrees for the body, 0..100 for the gripper."""
        from lerobot.motors import MotorNormMode

        expected = {name: MotorNormMode.DEGREES for name in so101.BODY_JOINTS}
        expected[so101.JOINT_NAMES[so101.GRIPPER]] = MotorNormMode.RANGE_0_100
        motors = self.bus.motors
        if tuple(motors) != so101.JOINT_NAMES:
            return [f"LeRobot's leader has motors {list(motors)}, expected {list(so101.JOINT_NAMES)}"]
        return [f"motor {name!r} reads in {motors[name].norm_mode.value} units, expected {mode.value}"
                for name, mode in expected.items() if motors[name].norm_mode is not mode]

    def close(self) -> None:
        """Close the port (torque is off since connect() and never enabled); safe to call twice, never raises."""
        if self.is_connected:
            try:
                self.bus.port_handler.closePort()
            except OSError:
                pass

    # --- read ----------------------------------------------------------------------------------------------
    def read(self) -> JointReading:
        """Positions (6,) radians, stamped (time.time()) in the middle of the read; never stale nor partial:
        LeRobot's sync read fails whole when any servo does not answer, and that raises ArmReadError."""
        if not self.is_connected:
            raise ArmReadError(f"the leader on {self.port} is not connected")
        drop_input(self.bus.port_handler)  # a late reply to an earlier read would be taken for this one's
        started = time.time()
        try:
            action = self.leader.get_action()  # {"<joint>.pos": degrees | gripper 0..100}
        except (*BUS_ERRORS, RuntimeError) as error:
            silent = self._silent_servos()
            who = f"; no answer from {silent}" if silent else ""
            raise ArmReadError(f"reading the leader's Present_Position failed: {one_line(error)}{who}") from None
        finished = time.time()
        values = np.array([action[f"{name}.pos"] for name in so101.JOINT_NAMES], dtype=np.float64)
        return JointReading(so101.from_lerobot(values), (started + finished) / 2)

    def _silent_servos(self) -> list[str]:
        """'name (id n)' of the servos that do not answer a ping, after a failed read: what to plug in again."""
        handler, port = self.bus.packet_handler, self.bus.port_handler
        silent = []
        for name, motor in self.bus.motors.items():
            try:
                drop_input(self.bus.port_handler)  # late replies to the failed read would be taken for the ping's
                answered = handler.ping(port, motor.id)[1] == 0
            except BUS_ERRORS:  # the adapter went away, or a garbled reply
                answered = False
            if not answered:
                silent.append(f"{name} (id {motor.id})")
        return silent
