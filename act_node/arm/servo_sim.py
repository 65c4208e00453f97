"""A simulated Feetech STS3215 servo bus on a pseudo-terminal: LeRobot's unmodified FeetechMotorsBus (through
feetech-servo-sdk and pyserial) opens `SimulatedBus.port` as if it were the SO-101's USB serial adapter.

    LeRobot FeetechMotorsBus --pyserial--> pty slave | pty master <-- serving thread
                                                                        |  Feetech protocol 0 packets
                                                 SimulatedServo x 6 (a register map each, faults)
                                                                        |  physics thread at physics_hz:
                                                                        |  goal ticks -> radians (calibration)
                                                 ArmPhysics: FirstOrderArm (unit tests) or PyBulletArm

Protocol 0 ("SCS"): instruction `FF FF id len inst params.. checksum`, status `FF FF id len error params..
checksum`, len = params + 2, checksum = ~(id + len + inst/error + params) & 0xFF. Instructions served: ping,
read, write, sync read (0x82), sync write (0x83), broadcast ping. A packet with a bad checksum is ignored, as a
servo does. Register addresses are the STS3215 manual's (`REGISTERS`; a test checks them against LeRobot's
control table). Multi-byte registers are little-endian; Goal/Present_Position carry a sign bit at 15 and
Homing_Offset at 11. Present_Position = encoder - Homing_Offset, wrapped to 0..4095 (LeRobot clears the
Phase register's bit 4, which selects that wrap).

A simulated hand stands in for the person `lerobot-calibrate` asks to move the arm: once the servos' calibration
registers are reset with torque off (LeRobot's reset_calibration, then its half-turn homing), it moves each joint
but wrist_roll through the arm's true range (`calibration`) and back to the middle, one after the other, while
LeRobot records the ranges; then it lets go and says so (`say`), and ENTER ends the recording.

Every write (single or sync) is logged with the time, the servo, the register, the value and the servo's
present position and torque at that moment, so that tests can check invariants on every write.
"""

from __future__ import annotations

import math
import os
import select
import threading
import time
import tty
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from act_node import so101
from act_node.arm.calibration import MAX_TICK, MOTOR_IDS, RESOLUTION, Calibration

# Instructions (Feetech protocol 0)
PING, READ, WRITE, REG_WRITE, ACTION, SYNC_READ, SYNC_WRITE = 0x01, 0x02, 0x03, 0x04, 0x05, 0x82, 0x83
BROADCAST_ID = 0xFE
# Status packet error byte (the SDK's ERRBIT_*); the Status register (65) carries the same bits.
ERROR_VOLTAGE, ERROR_ANGLE, ERROR_OVERHEAT, ERROR_OVERCURRENT, ERROR_OVERLOAD = 0x01, 0x02, 0x04, 0x08, 0x20

# name: (address, bytes), from the STS3215 memory table
REGISTERS = {
    "Firmware_Major_Version": (0, 1), "Firmware_Minor_Version": (1, 1), "Model_Number": (3, 2), "ID": (5, 1),
    "Baud_Rate": (6, 1), "Return_Delay_Time": (7, 1), "Response_Status_Level": (8, 1),
    "Min_Position_Limit": (9, 2), "Max_Position_Limit": (11, 2), "Max_Temperature_Limit": (13, 1),
    "Max_Voltage_Limit": (14, 1), "Min_Voltage_Limit": (15, 1), "Max_Torque_Limit": (16, 2), "Phase": (18, 1),
    "Unloading_Condition": (19, 1), "LED_Alarm_Condition": (20, 1), "P_Coefficient": (21, 1),
    "D_Coefficient": (22, 1), "I_Coefficient": (23, 1), "Minimum_Startup_Force": (24, 2),
    "CW_Dead_Zone": (26, 1), "CCW_Dead_Zone": (27, 1), "Protection_Current": (28, 2),
    "Angular_Resolution": (30, 1), "Homing_Offset": (31, 2), "Operating_Mode": (33, 1),
    "Protective_Torque": (34, 1), "Protection_Time": (35, 1), "Overload_Torque": (36, 1),
    "Torque_Enable": (40, 1), "Acceleration": (41, 1), "Goal_Position": (42, 2), "Goal_Time": (44, 2),
    "Goal_Velocity": (46, 2), "Torque_Limit": (48, 2), "Lock": (55, 1), "Present_Position": (56, 2),
    "Present_Velocity": (58, 2), "Present_Load": (60, 2), "Present_Voltage": (62, 1),
    "Present_Temperature": (63, 1), "Status": (65, 1), "Moving": (66, 1), "Present_Current": (69, 2),
    "Maximum_Acceleration": (85, 1),
}
ADDRESS_NAMES = {address: name for name, (address, _) in REGISTERS.items()}
STS3215_MODEL = 777
FIRMWARE = (3, 10)
SIGN_BITS = {"Goal_Position": 15, "Present_Position": 15, "Present_Velocity": 15, "Homing_Offset": 11,
             "Present_Load": 10}


def checksum(body: bytes | list[int]) -> int:
    return ~sum(body) & 0xFF


def encode_sign(value: int, bit: int) -> int:
    return (abs(value) | (1 << bit)) if value < 0 else value


def decode_sign(raw: int, bit: int) -> int:
    return -(raw & ~(1 << bit)) if raw & (1 << bit) else raw


# --- physics behind the registers -----------------------------------------------------------------------
class ArmPhysics(Protocol):
    """What the servos drive: joint angles in radians."""

    def positions(self) -> np.ndarray:
        """(6,) radians."""

    def advance(self, dt_s: float, goals_rad: np.ndarray, torque: np.ndarray) -> None:
        """Move for `dt_s` seconds towards `goals_rad` (6,) on the joints whose `torque` (6,) bool is on;
        the others stay where they are (no gravity: a simplification)."""


class FirstOrderArm:
    """Each joint follows its goal with a first-order lag, at most the STS3215's no-load speed."""

    def __init__(self, start_rad: np.ndarray | None = None, time_constant_s: float = 0.05,
                 max_velocity_rad_s: float = so101.MAX_VELOCITY_RAD_S):
        self.q = np.zeros(6) if start_rad is None else np.asarray(start_rad, float).copy()
        self.time_constant_s = time_constant_s
        self.max_velocity_rad_s = max_velocity_rad_s

    def positions(self) -> np.ndarray:
        return self.q.copy()

    def advance(self, dt_s: float, goals_rad: np.ndarray, torque: np.ndarray) -> None:
        step = (goals_rad - self.q) * (1.0 - math.exp(-dt_s / self.time_constant_s))
        bound = self.max_velocity_rad_s * dt_s
        self.q = np.where(torque, self.q + np.clip(step, -bound, bound), self.q)


class PyBulletArm:
    """The table-top's PyBullet arm as servo physics. The one place the servo bus touches act_node.tabletop:
    a Robot in its World (and whatever else that world holds), stepped at the world's physics rate."""

    def __init__(self, robot=None, start_rad: np.ndarray | None = None):
        from act_node.tabletop.robot import Robot  # pybullet only when this physics is used
        from act_node.tabletop.world import World

        if robot is None:
            world = World()
            world.clear()
            with world.no_rendering():
                world.add_table()
                robot = Robot(world)
                robot.load(np.zeros(6) if start_rad is None else np.asarray(start_rad, float))
        self.robot = robot
        self.world = robot.world
        self._leftover_s = 0.0

    def positions(self) -> np.ndarray:
        return self.robot.joint_positions()

    def advance(self, dt_s: float, goals_rad: np.ndarray, torque: np.ndarray) -> None:
        # a joint without torque holds where it is (PyBullet's position motor at the present angle)
        self.robot.command(np.where(torque, goals_rad, self.robot.joint_positions()))
        self._leftover_s += dt_s
        substeps = int(self._leftover_s * self.world.physics_hz)
        substeps = min(substeps, self.world.physics_hz // 10)  # a stalled caller does not cost seconds of physics
        self._leftover_s = min(self._leftover_s - substeps / self.world.physics_hz, 0.1)
        self.world.step(substeps)


# --- a person's hand during lerobot-calibrate ---------------------------------------------------------------
HAND_JOINTS = tuple(i for i, name in enumerate(so101.JOINT_NAMES) if name != "wrist_roll")  # LeRobot: 0..4095 for it
HAND_DELAY_S = 0.5  # after the last homing write: LeRobot has read the homing pose by then
HAND_DWELL_S = 0.3  # at each end of a range, as a hand that meets the stop


class Hand:
    """Joint targets over time (radians) for a hand that moves each joint of HAND_JOINTS in turn from where it is
    to the low end of `low`..`high`, to the high end, to `middle`, dwelling at each at speed `speed_rad_s`."""

    def __init__(self, start: np.ndarray, low: np.ndarray, high: np.ndarray, middle: np.ndarray,
                 speed_rad_s: float):
        self.legs: list[tuple[int, float, float, float]] = []  # (joint, from, to, seconds), dwells as from == to
        pose = np.asarray(start, float).copy()
        for joint in HAND_JOINTS:
            for goal in (low[joint], high[joint], middle[joint]):
                self.legs.append((joint, pose[joint], goal, abs(goal - pose[joint]) / speed_rad_s))
                self.legs.append((joint, goal, goal, HAND_DWELL_S))
                pose[joint] = goal
        self.start = np.asarray(start, float).copy()
        self.duration_s = sum(leg[3] for leg in self.legs)

    def pose(self, t_s: float) -> tuple[np.ndarray, int | None]:
        """(6,) radians at `t_s` seconds from its start, and the joint it moves (None: done, every joint let go)."""
        pose, elapsed = self.start.copy(), 0.0
        for joint, begin, end, seconds in self.legs:
            if t_s < elapsed + seconds:
                pose[joint] = begin + (end - begin) * (t_s - elapsed) / seconds
                return pose, joint
            pose[joint] = end
            elapsed += seconds
        return pose, None


# --- servos -----------------------------------------------------------------------------------------------
@dataclass
class ServoFaults:
    """Faults one servo can show; change them any time with SimulatedBus.fault()."""

    silent: bool = False  # answers nothing: unplugged, dead, or a wrong ID
    corrupt: bool = False  # answers with a wrong checksum
    drop_replies: int = 0  # the next N replies are lost (a glitch)
    late_s: float = 0.0  # replies leave this late: past the host's timeout they arrive while it reads the next one
    stuck: bool = False  # the horn does not follow the goal (a jammed gear)
    error_bits: int = 0  # ERROR_* flags in every reply and in the Status register
    position_bias: int = 0  # ticks added to Present_Position (a slipped horn, a calibration that no longer fits)


@dataclass
class WriteRecord:
    time_s: float  # time.monotonic() when the servo took it
    servo_id: int
    register: str
    value: int  # decoded (sign applied)
    present_ticks: int  # Present_Position when the write arrived
    torque: bool  # torque enabled when the write arrived
    sync: bool  # arrived in a sync write


class SimulatedServo:
    """One STS3215's memory (256 bytes) and faults."""

    def __init__(self, servo_id: int, homing_offset: int, range_min: int, range_max: int):
        self.memory = bytearray(256)
        self.faults = ServoFaults()
        for name, value in {"Firmware_Major_Version": FIRMWARE[0], "Firmware_Minor_Version": FIRMWARE[1],
                            "Model_Number": STS3215_MODEL, "ID": servo_id, "Baud_Rate": 0, "Return_Delay_Time": 250,
                            "Response_Status_Level": 1, "Min_Position_Limit": range_min,
                            "Max_Position_Limit": range_max, "Max_Temperature_Limit": 70, "Max_Voltage_Limit": 140,
                            "Min_Voltage_Limit": 40, "Max_Torque_Limit": 1000, "P_Coefficient": 32,
                            "D_Coefficient": 32, "Protection_Current": 500, "Homing_Offset": homing_offset,
                            "Overload_Torque": 80, "Acceleration": 0, "Torque_Limit": 1000,
                            "Present_Voltage": 121, "Present_Temperature": 31, "Lock": 1}.items():
            self.set(name, value)

    @property
    def servo_id(self) -> int:
        return self.memory[REGISTERS["ID"][0]]

    def get(self, name: str) -> int:
        address, size = REGISTERS[name]
        raw = int.from_bytes(self.memory[address: address + size], "little")
        return decode_sign(raw, SIGN_BITS[name]) if name in SIGN_BITS else raw

    def set(self, name: str, value: int) -> None:
        address, size = REGISTERS[name]
        raw = encode_sign(int(value), SIGN_BITS[name]) if name in SIGN_BITS else int(value)
        self.memory[address: address + size] = raw.to_bytes(size, "little")

    @property
    def torque(self) -> bool:
        return self.get("Torque_Enable") == 1

    def goal_ticks(self) -> int:
        """The goal the servo drives to: Goal_Position within its position limits (the servo clamps)."""
        goal = self.get("Goal_Position")
        low, high = self.get("Min_Position_Limit"), self.get("Max_Position_Limit")
        return int(min(max(goal, low), high)) if high > low else goal


# --- the bus ----------------------------------------------------------------------------------------------
@dataclass
class _Stats:
    packets: int = 0
    bad_checksums: int = 0
    replies: int = 0
    unknown: list[int] = field(default_factory=list)


class SimulatedBus:
    """Six STS3215 servos (IDs 1..6, the SO-101's joints in order) on a pseudo-terminal. `calibration` is the
    arm's truth: it fixes the homing offset and limits each servo holds at start and how ticks map to joint
    angles. Use as a context manager or call start()/close()."""

    def __init__(self, calibration: Calibration, physics: ArmPhysics | None = None,
                 start_rad: np.ndarray | None = None, physics_hz: float = 200.0, hand_speed_rad_s: float = 2.0,
                 say=None):
        """`hand_speed_rad_s`: how fast the simulated hand moves the joints during lerobot-calibrate (0: no hand);
        `say`: called with a line of text as the hand starts a joint and when it is done (None: silent)."""
        self.calibration = calibration
        self.hand_speed_rad_s = hand_speed_rad_s
        self.say = say or (lambda text: None)
        self._hand: Hand | None = None
        self._hand_due: float | None = None  # when the hand starts (a homing write on a reset servo sets it)
        self._hand_began = 0.0
        self._hand_joint: int | None = None
        self.physics = physics if physics is not None else FirstOrderArm(start_rad)
        self.servos = {MOTOR_IDS[name]: SimulatedServo(m.id, m.homing_offset, m.range_min, m.range_max)
                       for name, m in calibration.motors.items()}
        self._homing = np.array([calibration.motors[n].homing_offset for n in so101.JOINT_NAMES])
        self.writes: list[WriteRecord] = []
        self.stats = _Stats()
        self.lock = threading.RLock()  # guards the servos' memory and the write log
        self.physics_lock = threading.RLock()  # guards the physics (pybullet is not thread-safe)
        self.physics_hz = physics_hz
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline: bytes pass as they are
        self.port = os.ttyname(self._slave)
        self._buffer = bytearray()
        self._last_s = time.monotonic()
        self._running = False
        self._stalled_until = 0.0
        self._threads: list[threading.Thread] = []
        self._present(self.physics.positions(), 0.0)
        for servo in self.servos.values():  # goal = present, as a servo after power-on
            servo.set("Goal_Position", servo.get("Present_Position"))

    # --- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> SimulatedBus:
        self._running = True
        self._last_s = time.monotonic()
        self._threads = [threading.Thread(target=self._serve, name="sts3215-bus", daemon=True),
                         threading.Thread(target=self._run_physics, name="sts3215-physics", daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def close(self) -> None:
        self._running = False
        for thread in self._threads:
            thread.join(timeout=2.0)
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> SimulatedBus:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what tests set and look at -------------------------------------------------------------------------
    def fault(self, servo_id: int, **changes) -> None:
        """Set faults on one servo, e.g. fault(3, silent=True) or fault(2, error_bits=ERROR_OVERLOAD)."""
        with self.lock:
            faults = self.servos[servo_id].faults
            for name, value in changes.items():
                if not hasattr(faults, name):
                    raise ValueError(f"unknown servo fault {name!r}; known: {list(vars(faults))}")
                setattr(faults, name, value)

    def set_register(self, servo_id: int, name: str, value: int) -> None:
        """Write a register behind the driver's back (a stale goal left by another program, say)."""
        with self.lock:
            self.servos[servo_id].set(name, value)

    def register(self, servo_id: int, name: str) -> int:
        with self.lock:
            return self.servos[servo_id].get(name)

    def positions_rad(self) -> np.ndarray:
        with self.physics_lock:
            return self.physics.positions()

    def torques(self) -> dict[int, bool]:
        with self.lock:
            return {servo_id: servo.torque for servo_id, servo in self.servos.items()}

    def goal_writes(self) -> list[WriteRecord]:
        with self.lock:
            return [w for w in self.writes if w.register == "Goal_Position"]

    # --- physics <-> registers -------------------------------------------------------------------------------
    def _run_physics(self) -> None:
        """The servos' own loop: drive the physics towards the goal registers at `physics_hz` on wall time and
        write Present_* back; the serving thread answers from the registers without waiting for physics."""
        period = 1.0 / self.physics_hz
        while self._running:
            began = time.monotonic()
            self._step()
            time.sleep(max(0.0, period - (time.monotonic() - began)))

    def _step(self) -> None:
        with self.lock:
            servos = [self.servos[MOTOR_IDS[name]] for name in so101.JOINT_NAMES]
            goal_ticks = np.array([s.goal_ticks() for s in servos])
            homing = np.array([s.get("Homing_Offset") for s in servos])
            stuck = np.array([s.faults.stuck for s in servos])
            torque = np.array([s.torque for s in servos])
        # the goal register is in the homed frame; the joint angle maps to it through the arm's true calibration
        goals = self.calibration.to_radians(goal_ticks + homing - self._homing)
        now = time.monotonic()
        dt, self._last_s = now - self._last_s, now
        held = self._hand_pose(now)  # a hand moves the joints whose torque is off, as a person does
        if held is not None:
            goals = np.where(torque, goals, held)
            torque = np.ones(6, bool)
        with self.physics_lock:
            q = self.physics.positions()
            self.physics.advance(dt, np.where(stuck, q, goals), torque)
            q_new = self.physics.positions()
        self._present(q_new, dt, q)

    def _hand_pose(self, now: float) -> np.ndarray | None:
        """Where the simulated hand holds the joints now (radians), or None when no hand is on the arm."""
        if self._hand is None and self._hand_due is not None and now >= self._hand_due:
            low, high = self.calibration.range_radians()  # the arm's true range: where its stops are
            with self.physics_lock:
                start = self.physics.positions()
            self._hand = Hand(start, low, high, (low + high) / 2, self.hand_speed_rad_s)
            self._hand_due, self._hand_began, self._hand_joint = None, now, None
        if self._hand is None:
            return None
        pose, joint = self._hand.pose(now - self._hand_began)
        if joint != self._hand_joint:
            self._hand_joint = joint
            if joint is None:
                self._hand = None
                self.say("simulated hand: every joint but wrist_roll went through its range and back to the middle; "
                         "press ENTER in lerobot-calibrate to end the recording")
                return None
            self.say(f"simulated hand: moving {so101.JOINT_NAMES[joint]} through its range")
        return pose

    def _present(self, q: np.ndarray, dt: float, q_before: np.ndarray | None = None) -> None:
        """Present_Position (and velocity, moving, status) registers for joint angles `q` (6,) radians."""
        encoder = self.calibration.from_radians(q) + self._homing
        speeds = np.zeros(6) if q_before is None or dt <= 0 else (q - q_before) / dt
        with self.lock:
            self._encoder = encoder
            for name, ticks, speed in zip(so101.JOINT_NAMES, encoder, speeds):
                servo = self.servos[MOTOR_IDS[name]]
                self._present_position(servo, int(ticks))
                # 0.087 degrees per tick per second: the STS3215's speed unit
                servo.set("Present_Velocity", int(np.clip(math.degrees(speed) / 0.087, -MAX_TICK, MAX_TICK)))
                servo.set("Moving", int(abs(speed) > 0.01))
                servo.set("Status", servo.faults.error_bits)

    @staticmethod
    def _present_position(servo: SimulatedServo, encoder: int) -> None:
        servo.set("Present_Position", (encoder - servo.get("Homing_Offset") + servo.faults.position_bias) % RESOLUTION)

    # --- serving ---------------------------------------------------------------------------------------------
    def stall(self, seconds: float) -> None:
        """Answer nothing for `seconds` (0: from now on again), then everything asked meanwhile at once, in
        order: a host or USB adapter that stalled. Replies the host has stopped waiting for arrive in a burst."""
        self._stalled_until = time.monotonic() + max(0.0, seconds)

    def _serve(self) -> None:
        while self._running:
            try:
                ready, _, _ = select.select([self._master], [], [], 0.005 if self._buffer else 0.05)
                if ready:
                    self._buffer += os.read(self._master, 4096)
                if self._buffer and time.monotonic() >= self._stalled_until:  # stalled: requests wait
                    self._handle_packets()
            except OSError:  # the pty went away while closing
                return

    def _handle_packets(self) -> None:
        while True:
            start = self._buffer.find(b"\xff\xff")
            if start < 0:
                self._buffer.clear()
                return
            del self._buffer[:start]
            while len(self._buffer) > 2 and self._buffer[2] == 0xFF:  # FF FF FF: header starts one later
                del self._buffer[0]
            if len(self._buffer) < 4:
                return
            total = self._buffer[3] + 4
            if len(self._buffer) < total:
                return
            packet = bytes(self._buffer[:total])
            del self._buffer[:total]
            with self.lock:
                self.stats.packets += 1
                if checksum(packet[2:-1]) != packet[-1]:
                    self.stats.bad_checksums += 1
                    continue
                reply = self._answer(packet[2], packet[4], packet[5:-1])
            if reply:
                os.write(self._master, reply)

    def _status(self, servo: SimulatedServo, params: bytes = b"") -> bytes:
        if servo.faults.silent:
            return b""
        if servo.faults.drop_replies > 0:
            servo.faults.drop_replies -= 1
            return b""
        body = bytes([servo.servo_id, len(params) + 2, servo.faults.error_bits & 0x7F]) + params
        total = checksum(body)
        if servo.faults.corrupt:
            total ^= 0x5A
        self.stats.replies += 1
        packet = b"\xff\xff" + body + bytes([total])
        if servo.faults.late_s > 0:
            self._send_later(packet, servo.faults.late_s)
            return b""
        return packet

    def _send_later(self, packet: bytes, delay_s: float) -> None:
        def send() -> None:
            try:
                os.write(self._master, packet)
            except OSError:  # the bus was closed meanwhile
                pass

        timer = threading.Timer(delay_s, send)
        timer.daemon = True
        timer.start()

    def _answer(self, servo_id: int, instruction: int, params: bytes) -> bytes:
        if instruction == SYNC_WRITE:
            address, size = params[0], params[1]
            for offset in range(2, len(params) - size + 1, size + 1):
                servo = self.servos.get(params[offset])
                if servo is not None and not servo.faults.silent:
                    self._write(servo, address, params[offset + 1: offset + 1 + size], sync=True)
            return b""
        if instruction == SYNC_READ:
            address, size = params[0], params[1]
            return b"".join(self._status(self.servos[i], bytes(self.servos[i].memory[address: address + size]))
                            for i in params[2:] if i in self.servos)
        if servo_id == BROADCAST_ID:
            if instruction == PING:
                return b"".join(self._status(s) for s in self.servos.values())
            if instruction == WRITE:
                for servo in self.servos.values():
                    if not servo.faults.silent:
                        self._write(servo, params[0], params[1:], sync=True)
            return b""
        servo = self.servos.get(servo_id)
        if servo is None:
            return b""
        if instruction == PING:
            return self._status(servo)
        if instruction == READ:
            address, size = params[0], params[1]
            return self._status(servo, bytes(servo.memory[address: address + size]))
        if instruction == WRITE:
            if not servo.faults.silent:
                self._write(servo, params[0], params[1:], sync=False)
            return self._status(servo) if servo.get("Response_Status_Level") else b""
        self.stats.unknown.append(instruction)
        return b""

    def _write(self, servo: SimulatedServo, address: int, data: bytes, sync: bool) -> None:
        name = ADDRESS_NAMES.get(address, f"@{address}")
        raw = int.from_bytes(data, "little")
        value = decode_sign(raw, SIGN_BITS[name]) if name in SIGN_BITS else raw
        self.writes.append(WriteRecord(time.monotonic(), servo.servo_id, name, value,
                                       servo.get("Present_Position"), servo.torque, sync))
        if name in ("Present_Position", "Model_Number", "Firmware_Major_Version", "Firmware_Minor_Version"):
            return  # read-only
        servo.memory[address: address + len(data)] = data
        if name == "Homing_Offset":  # a servo's present position follows its new homing at once
            joint = next(i for i, n in enumerate(so101.JOINT_NAMES) if self.servos[MOTOR_IDS[n]] is servo)
            self._present_position(servo, int(self._encoder[joint]))
        if (name == "Homing_Offset" and self.hand_speed_rad_s > 0 and not servo.torque and self._hand is None
                and servo.get("Min_Position_Limit") == 0 and servo.get("Max_Position_Limit") == MAX_TICK):
            # LeRobot's reset_calibration, then its half-turn homing: lerobot-calibrate records the ranges next
            self._hand_due = time.monotonic() + HAND_DELAY_S
        elif name in ("Min_Position_Limit", "Max_Position_Limit"):
            self._hand_due = None  # a reset or a calibration being written (write_calibration: homing, then range)


def main(argv: list[str] | None = None) -> None:
    """Serve a simulated SO-101 bus until Ctrl-C or SIGTERM, for running the arm node (or LeRobot's own tools)
    against it: `python -m act_node.arm.servo_sim --calibration ~/cal/follower.json` prints the port."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--calibration", required=True,
                        help="the arm's calibration file; written (calibration.so101_calibration) if absent")
    parser.add_argument("--physics", choices=("first-order", "pybullet"), default="first-order")
    parser.add_argument("--hand-speed", type=float, default=2.0,
                        help="rad/s at which a simulated hand moves the joints through their ranges while "
                        "lerobot-calibrate records them (0: no hand)")
    args = parser.parse_args(argv)
    from pathlib import Path

    from act_node.arm.calibration import so101_calibration

    path = Path(args.calibration).expanduser()
    if not path.exists():
        so101_calibration().save(path)
    calibration = Calibration.load(path)
    physics = PyBulletArm() if args.physics == "pybullet" else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with SimulatedBus(calibration, physics=physics, hand_speed_rad_s=args.hand_speed, say=say) as bus:
        print(bus.port, flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
