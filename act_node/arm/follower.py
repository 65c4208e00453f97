"""The real SO-101 follower behind the arm interface: LeRobot 0.6.1's `SOFollower` (config type
`so101_follower`, `use_degrees=True`) and its FeetechMotorsBus, with the calibration file
`<calibration_dir>/<robot_id>.json` that `lerobot-calibrate` wrote, connected without calibrating.

Where LeRobot's own lifecycle is not safe enough, this class does the step itself:
- `SOFollower.connect()` ends with torque enabled on whatever goal the servos hold (a stale goal from the last
  program makes the arm jump). configure() opens the bus without that, checks every motor, the calibration
  and the units, and writes LeRobot's motor settings with torque off; activate() writes goal = present on
  every servo (each write acknowledged) and only then enables torque.
- `disconnect()` stops at the first servo that does not answer and leaves the rest torqued; deactivate()
  turns torque off servo by servo, collecting the ones that do not answer, then closes the port.
- `sync_read` drops the servos' error byte; status() reads each servo's voltage, temperature and Status
  register itself and keeps the status packet's error byte.
- A reply that comes after the SDK's timeout stays in the port and is taken as the answer to the next read:
  the SDK's clearPort() is serial flush() (it waits for the output; it does not drop the input) and readRx()
  takes the first packet of the right servo ID whatever its length. A late status reply (Present_Voltage,
  Present_Temperature: 121 + 31 * 256 = 8057) then reads as Present_Position, and `SOFollower.send_action`,
  whose `max_relative_target` guard reads the present position again, computes its "safe" goal from it: the
  second guard moved the goal 500 degrees away (seen on a loaded machine). So: input left in the port is
  dropped before every read, after a transaction that failed the port is drained until it is quiet, a
  position that is not a 12-bit value is a failed read, and the guard runs on the tick's own checked reading.
Reads use raw ticks and act_node.arm.calibration (a mirror of LeRobot's normalisation, checked against it
in the tests) so that a position outside the calibrated range is seen, not clamped; writes are LeRobot's
send_action without its second read: `ensure_safe_goal_position` (LeRobot's `max_relative_target`, a float)
on that reading, then the bus's sync_write of Goal_Position in degrees.
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
    drain,
    drop_input,
    servo_problems,
    until_written,
    wait_in_kernel,
)
from act_node.arm.calibration import RESOLUTION, Calibration, CalibrationError
from act_node.arm.interface import (
    ArmConfigurationError,
    ArmError,
    ArmInterface,
    ArmReadError,
    JointReading,
    ServoStatus,
)
from act_node.arm.servo_sim import REGISTERS

UNITS = ("degrees", "range_m100_100")  # what a checkpoint's joints can be in (LeRobot < 0.4.4 recorded -100..100)
FRESH_READING_S = 0.1  # write() reuses the last read this recent for LeRobot's guard, else it reads


def default_calibration_dir() -> Path:
    """Where lerobot-calibrate writes an SO follower's file: <HF_LEROBOT_CALIBRATION>/robots/so_follower."""
    from lerobot.robots.so_follower import SOFollower
    from lerobot.utils.constants import HF_LEROBOT_CALIBRATION, ROBOTS

    return HF_LEROBOT_CALIBRATION / ROBOTS / SOFollower.name


class SO101FollowerArm(ArmInterface):
    def __init__(self, port: str, robot_id: str, calibration_dir: str | Path | None = None,
                 checkpoint_units: str = "degrees",
                 max_relative_target_deg: float | None = 30.0, read_retries: int = 1):
        self.port, self.robot_id = port, robot_id
        self.calibration_dir = Path(calibration_dir).expanduser() if calibration_dir else default_calibration_dir()
        self.calibration_path = self.calibration_dir / f"{robot_id}.json"
        self.checkpoint_units = checkpoint_units
        self.max_relative_target_deg = None if max_relative_target_deg is None else float(max_relative_target_deg)
        self.read_retries = read_retries
        self.robot = None
        self.calibration: Calibration | None = None
        self._last: JointReading | None = None  # the last checked reading (LeRobot's guard runs on it)
        self.drained_bytes = 0  # late or unasked-for bytes dropped from the port

    @property
    def bus(self):
        return self.robot.bus

    # --- lifecycle -----------------------------------------------------------------------------------------
    def configure(self) -> None:
        from lerobot.robots.so_follower import SOFollower, SOFollowerRobotConfig

        problems = []
        if self.checkpoint_units != "degrees":
            problems.append(f"the checkpoint's joints are in {self.checkpoint_units!r} units but this arm runs "
                            f"LeRobot's SO follower with use_degrees=True (degrees, gripper 0..100); datasets "
                            f"recorded with LeRobot's defaults before 0.4.4 are in -100..100: retrain or "
                            f"convert instead of moving the arm with the wrong units")
        try:
            self.calibration = Calibration.load(self.calibration_path)
        except CalibrationError as error:
            problems.append(str(error))
        config = SOFollowerRobotConfig(port=self.port, id=self.robot_id, calibration_dir=self.calibration_dir,
                                       use_degrees=True, max_relative_target=self.max_relative_target_deg,
                                       disable_torque_on_disconnect=True, num_read_retries=self.read_retries)
        self.robot = SOFollower(config)  # loads the calibration file when it exists
        try:
            self.bus.connect(handshake=False)  # the port only: the checks below list every problem at once
        except (ConnectionError, OSError) as error:
            raise ArmConfigurationError([*problems, f"cannot open port {self.port}: {error}"]) from None
        wait_in_kernel(self.bus.port_handler)
        answering = servo_problems(self.bus, self.port, problems)
        if self.calibration is not None:
            remedy = (f"lerobot-calibrate --robot.type=so101_follower --robot.port={self.port} "
                      f"--robot.id={self.robot_id} --robot.calibration_dir={self.calibration_dir}, then ENTER writes "
                      f"the file's values to the servos, 'c' calibrates anew")
            problems += calibration_mismatches(self.bus, self.calibration, self.calibration_path, answering, remedy)
        if problems:
            self._close()
            raise ArmConfigurationError(problems)
        try:  # idempotent writes, retried: LeRobot's configure_motors() does not retry a lost reply
            until_written(self._write_motor_settings, self.bus.port_handler, (*BUS_ERRORS, RuntimeError))
        except WritesFailed as failed:
            self._close()
            raise ArmConfigurationError([f"writing the motor settings {failed}"]) from None

    def _write_motor_settings(self) -> None:
        """LeRobot's SOFollower.configure() settings, written with torque off and left off (its own version
        re-enables torque on exit, before any goal is seeded)."""
        from lerobot.motors.feetech import OperatingMode

        config = self.robot.config
        self.bus.disable_torque(num_retry=2)
        self.bus.configure_motors()
        for name in self.bus.motors:
            self.bus.write("Operating_Mode", name, OperatingMode.POSITION.value)
            self.bus.write("P_Coefficient", name, config.position_p_coefficient)
            self.bus.write("I_Coefficient", name, config.position_i_coefficient)
            self.bus.write("D_Coefficient", name, config.position_d_coefficient)
            if name == "gripper":  # LeRobot's limits against burning the gripper servo out
                self.bus.write("Max_Torque_Limit", name, 500)
                self.bus.write("Protection_Current", name, 250)
                self.bus.write("Overload_Torque", name, 25)

    def activate(self) -> np.ndarray:
        reading = self.read()
        if reading.outside_range:
            raise ArmError(f"joints {list(reading.outside_range)} are outside the calibrated range at "
                           f"{np.round(reading.ticks).tolist()} ticks: not enabling torque")
        for name, ticks in zip(so101.JOINT_NAMES, reading.ticks):
            # acknowledged single writes: every goal is known to hold the present position before torque
            self.bus.write("Goal_Position", name, int(ticks), normalize=False, num_retry=2)
        self.bus.enable_torque(num_retry=2)
        return reading.positions

    def deactivate(self) -> list[str]:
        dead = self.set_torque(False) if self.robot is not None and self.bus.is_connected else []
        self._close()
        return dead

    def _close(self) -> None:
        if self.robot is not None and self.bus.is_connected:
            try:
                self.bus.port_handler.closePort()
            except OSError:
                pass

    # --- the port's input (act_node.arm.bus_checks: a late reply must not be read as the next one) ----------
    def _drop_input(self) -> int:
        """Drop what came unasked since the last transaction before asking anything; how many bytes."""
        dropped = drop_input(self.bus.port_handler)
        self.drained_bytes += dropped
        return dropped

    def _drain(self) -> None:
        """After a transaction that failed: drop input until the port is quiet (its replies may still come)."""
        self.drained_bytes += drain(self.bus.port_handler)

    # --- read and write ------------------------------------------------------------------------------------
    def read(self) -> JointReading:
        self._drop_input()
        started = time.time()
        try:
            raw = self.bus.sync_read("Present_Position", normalize=False, num_retry=self.read_retries)
        except (ConnectionError, RuntimeError, OSError) as error:
            self._drain()
            raise ArmReadError(f"reading Present_Position failed: {error}") from None
        finished = time.time()
        ticks = np.array([raw[name] for name in so101.JOINT_NAMES], dtype=np.int64)
        wrong = [f"{name} {int(t)}" for name, t in zip(so101.JOINT_NAMES, ticks) if not 0 <= t < RESOLUTION]
        if wrong:  # another register's reply taken for this one: nothing of this read can be trusted
            self._drain()
            raise ArmReadError(f"Present_Position is not a 12-bit position ({', '.join(wrong)} ticks): a late or "
                               f"foreign reply was read; the port was drained")
        reading = JointReading(self.calibration.to_radians(ticks), (started + finished) / 2, ticks,
                               tuple(self.calibration.outside_range(ticks)))
        self._last = reading
        return reading

    def write(self, goal_rad: np.ndarray) -> None:
        """Goal_Position in LeRobot's units through the bus's sync write, after LeRobot's max_relative_target
        guard (its ensure_safe_goal_position) on the last checked reading: SOFollower.send_action without its
        unchecked second read."""
        from lerobot.robots.utils import ensure_safe_goal_position

        values = so101.to_lerobot(np.asarray(goal_rad, float))
        goal = {name: float(v) for name, v in zip(so101.JOINT_NAMES, values)}
        if self.max_relative_target_deg is not None:
            reading = self._last
            if reading is None or time.time() - reading.stamp_s > FRESH_READING_S:
                reading = self.read()
            present = so101.to_lerobot(reading.positions)
            goal = ensure_safe_goal_position({name: (goal[name], float(p)) for name, p in
                                              zip(so101.JOINT_NAMES, present)}, self.max_relative_target_deg)
        try:
            self.bus.sync_write("Goal_Position", goal)
        except (ConnectionError, RuntimeError, OSError) as error:
            raise ArmError(f"writing Goal_Position failed: {error}") from None

    def set_torque(self, enabled: bool) -> list[str]:
        failed = []
        handler, port = self.bus.packet_handler, self.bus.port_handler
        torque, lock = REGISTERS["Torque_Enable"][0], REGISTERS["Lock"][0]
        for name, motor in self.bus.motors.items():  # one by one: a dead servo must not keep the others torqued
            # through the SDK: LeRobot's write() raises on a servo's error flags although the write took
            answered = any(handler.write1ByteTxRx(port, motor.id, torque, int(enabled))[0] == 0 for _ in range(3))
            if answered:
                handler.write1ByteTxRx(port, motor.id, lock, int(enabled))
            else:
                failed.append(name)
        return failed

    def status(self) -> list[ServoStatus]:
        """Voltage (62), temperature (63) and Status (65) in one read per servo, keeping the error byte."""
        address = REGISTERS["Present_Voltage"][0]
        size = REGISTERS["Status"][0] - address + 1
        statuses = []
        self._drop_input()
        for name, motor in self.bus.motors.items():
            data, comm, error = self.bus.packet_handler.readTxRx(self.bus.port_handler, motor.id, address, size)
            if comm != 0 or len(data) < size:
                statuses.append(ServoStatus(name, False))
                self._drain()  # its reply may still come: not into the next servo's read
                continue
            statuses.append(ServoStatus(name, True, int(error) | data[-1], data[0] / 10.0, float(data[1])))
        return statuses

    def calibrated_range(self) -> tuple[np.ndarray, np.ndarray]:
        return self.calibration.range_radians()
