"""One arm's control loop without ROS: an ArmInterface, act_node.chunks.ChunkExecutor, the SafetyChain and the
ChunkLedger, joined so that the arm node stays thin and the tests drive the same code.

    add_chunk(stamp, actions)   any thread: validated, merged into the executor, counted in the ledger
    tick(now)                   the bus thread: read -> (status every n ticks) -> executor -> safety -> write
    stop() estop() reset()      any thread: they take the bus lock, so a bus transaction is never interleaved
    shutdown(rest, seconds)     optional interpolated move to a rest pose, torque off on every servo, close

Two locks: `bus_lock` around every arm call, `chunk_lock` around the executor, so that a chunk arriving never
waits for the bus and the bus never waits for a policy. `dry_run`: everything runs, but torque is never
enabled and no goal is written.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from act_node import so101
from act_node.arm.interface import ArmError, ArmInterface, ArmReadError, JointReading, ServoStatus
from act_node.arm.safety import ChunkLedger, Decision, SafetyChain, SafetyConfig
from act_node.chunks import ENSEMBLE_COEFF, Chunk, ChunkExecutor


@dataclass
class TickResult:
    reading: JointReading | None  # None: the read failed
    decision: Decision | None
    wrote: bool = False
    error: str = ""


@dataclass
class ControlStats:
    ticks: int = 0
    reads: int = 0
    read_failures: int = 0
    writes: int = 0
    write_failures: int = 0
    executor_clamps: int = 0  # joints the executor pulled into range or under its velocity bound
    last_error: str = ""
    statuses: list[ServoStatus] = field(default_factory=list)


class ArmController:
    def __init__(self, arm: ArmInterface, safety: SafetyConfig, merge: str = "replace",
                 stale_after_s: float = 1.0, status_every: int = 10, dry_run: bool = False,
                 ensemble_coeff: float = ENSEMBLE_COEFF):
        self.arm, self.safety_config, self.dry_run = arm, safety, dry_run
        self.fps = safety.fps
        self.status_every = max(1, int(status_every))
        self.merge, self.stale_after_s, self.ensemble_coeff = merge, stale_after_s, ensemble_coeff
        self.bus_lock = threading.RLock()
        self.chunk_lock = threading.Lock()
        self.ledger = ChunkLedger()
        self.stats = ControlStats()
        self.chain: SafetyChain | None = None
        self.executor: ChunkExecutor | None = None
        self.measured: np.ndarray | None = None

    # --- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> np.ndarray:
        """configure (refuses with every problem listed), activate (goal = present, then torque), and run from
        the measured pose. Returns it."""
        with self.bus_lock:
            self.arm.configure()
            lower, upper = self.arm.calibrated_range()
            self.chain = SafetyChain(self.safety_config, so101.LOWER_RAD, so101.UPPER_RAD, lower, upper,
                                     self.arm.joint_names)
            self.executor = ChunkExecutor(self.fps, self.chain.lower, self.chain.upper,
                                          self.safety_config.max_velocity_rad_s, merge=self.merge,
                                          ensemble_coeff=self.ensemble_coeff, stale_after_s=self.stale_after_s)
            try:
                measured = self.arm.read().positions if self.dry_run else self.arm.activate()
            except ArmError:
                self.arm.deactivate()  # torque off again and the port closed before refusing
                raise
            self._run_from(measured)
            return measured

    def _run_from(self, measured: np.ndarray) -> None:
        self.measured = np.asarray(measured, float).copy()
        self.chain.start(self.measured)
        with self.chunk_lock:
            self.executor.reset(self.measured)

    def shutdown(self, rest_rad: np.ndarray | None = None, seconds: float = 2.0) -> list[str]:
        """Optionally move to `rest_rad` along a straight line in joint space (through the safety chain, so the
        bounds hold), then torque off on every servo that answers and close. Returns the servos that did not
        answer."""
        with self.bus_lock:
            if rest_rad is not None and self.chain is not None and self.chain.writing and not self.dry_run:
                self._move_to(np.asarray(rest_rad, float), seconds)
            return self.arm.deactivate()

    def _move_to(self, rest: np.ndarray, seconds: float) -> None:
        """The interpolated move, one step a tick. A failed read counts in the chain as in tick(): the step
        waits for the next tick, and `max_failed_reads` in a row latch and end the move (no blind move). One
        reply lost on a loaded machine used to end it: torque went off wherever the arm was."""
        steps = max(1, int(round(seconds * self.fps)))
        start = self.chain.last_goal.copy()
        k = 1
        while k <= steps:
            began = time.monotonic()
            try:
                reading = self.arm.read()
            except ArmReadError as error:
                self.chain.on_read_failed(str(error))
                if not self.chain.writing:
                    return
                time.sleep(max(0.0, 1.0 / self.fps - (time.monotonic() - began)))
                continue
            self.chain.on_read(reading, time.time())
            target = start + (rest - start) * k / steps
            decision = self.chain.filter(target, reading.positions)
            if decision.goal is None:
                return
            try:
                self.arm.write(decision.goal)
            except ArmError:  # the port failed: torque off (deactivate) must still run
                return
            k += 1
            time.sleep(max(0.0, 1.0 / self.fps - (time.monotonic() - began)))

    # --- chunks (any thread) ---------------------------------------------------------------------------------
    def add_chunk(self, stamp_s: float, actions: np.ndarray | None, now_s: float, problem: str = "") -> str:
        """Take a chunk (steps, 6) radians stamped with its observation's time; returns "" when applied or the
        reason it was rejected. `problem`: the message was already refused (MessageError's text)."""
        self.ledger.receive()
        reason = problem
        if not reason and (self.chain is None or not self.chain.writing):
            reason = f"arm {self.chain.state if self.chain else 'not started'}"
        if not reason:
            actions = np.asarray(actions, float)
            if actions.ndim != 2 or actions.shape[1] != len(self.arm.joint_names) or len(actions) == 0:
                reason = f"chunk of shape {actions.shape}, expected (steps, {len(self.arm.joint_names)})"
            elif not np.all(np.isfinite(actions)):
                reason = "chunk holds NaN or inf"
        if not reason:
            with self.chunk_lock:
                dropped = self.executor.add(Chunk(stamp_s, actions), now_s)
            if dropped >= len(actions):
                reason = f"every step is past (stamp {stamp_s:.3f} s, now {now_s:.3f} s)"
        if reason:
            self.ledger.reject(reason)
        else:
            self.ledger.apply()
        return reason

    # --- the bus loop's tick (one thread) -------------------------------------------------------------------
    def tick(self, now_s: float) -> TickResult:
        with self.bus_lock:
            self.stats.ticks += 1
            try:
                reading = self.arm.read()
            except ArmReadError as error:
                self.stats.read_failures += 1
                self.stats.last_error = str(error)
                self.chain.on_read_failed(str(error))
                return TickResult(None, None, error=str(error))
            self.stats.reads += 1
            self.measured = reading.positions
            self.chain.on_read(reading, now_s)
            if self.stats.ticks % self.status_every == 0:
                self.stats.statuses = self.arm.status()
                self.chain.on_status(self.stats.statuses)
            with self.chunk_lock:
                command = self.executor.next_command(now_s, reading.positions)
            self.stats.executor_clamps += command.clamped
            decision = self.chain.filter(command.positions, reading.positions, command.reason if command.held else "")
            if decision.goal is None or self.dry_run:
                return TickResult(reading, decision)
            try:
                self.arm.write(decision.goal)
            except ArmError as error:
                self.stats.write_failures += 1
                self.stats.last_error = str(error)
                return TickResult(reading, decision, error=str(error))
            self.stats.writes += 1
            return TickResult(reading, decision, wrote=True)

    # --- operator commands (any thread) --------------------------------------------------------------------
    def stop(self) -> str:
        """Freeze at the present pose (one goal = present written), then write nothing until reset()."""
        with self.bus_lock:
            if self.chain.state != "running":  # e-stopped or latched: nothing may be written
                return f"not stopped: the arm is {self.chain.state}, nothing is being written"
            try:
                measured = self.arm.read().positions
            except ArmReadError as error:
                self.chain.stop(self.chain.last_goal)
                return f"stopped; could not read the pose to freeze at ({error}): the last goal holds"
            goal = self.chain.stop(measured)
            if not self.dry_run:
                try:
                    self.arm.write(goal)
                except ArmError as error:
                    return f"stopped; writing the frozen pose failed: {error}"
            return "stopped at the present pose"

    def estop(self) -> str:
        """Latched until reset(): torque off on every servo that answers."""
        with self.bus_lock:
            self.chain.estop()
            dead = self.arm.set_torque(False)
        return "e-stopped: torque off" + (f"; no answer from {dead}" if dead else " on every servo")

    def reset(self) -> str:
        """Leave stop, e-stop or a latched fault: run again from a fresh read (goal = present, then torque)."""
        with self.bus_lock:
            try:
                measured = self.arm.read().positions if self.dry_run else self.arm.activate()
            except ArmError as error:
                return f"not reset: {error}"
            self._run_from(measured)
        return "reset: running from the present pose"
