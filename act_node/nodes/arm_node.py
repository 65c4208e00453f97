"""Arm node (`act_so101_node`): an SO-101 follower over LeRobot's Feetech bus, driven by action chunks.

    bus thread, fps on wall time:  read joints -> joint_states (radians, stamped at the read)
                                   -> ChunkExecutor's command for this tick -> safety chain -> write the goal
    executor thread:               act/action_chunk -> validated, merged, counted (applied or rejected + why)
                                   ~/stop ~/estop ~/reset (std_srvs/Trigger), /diagnostics once a second

The bus loop is a thread of its own, not an executor callback: nothing the policy or ROS does stalls it.
The work lives in act_node.arm (ArmController, SafetyChain, SO101FollowerArm); this file is ROS only.
It refuses to start (exit 2, every problem listed) when the arm is not ready. On shutdown (Ctrl-C, SIGTERM,
launch shutdown): an optional straight move to `rest_pose`, torque off on every servo that answers, port
closed. `dry_run`: everything runs, but torque is never enabled and no goal is written.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from act_node import so101
from act_node.arm.control import ArmController
from act_node.arm.follower import SO101FollowerArm
from act_node.arm.safety import SafetyConfig
from act_node.chunks import hold_chunk
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import (
    COMMANDS,
    RELIABLE,
    SENSOR,
    MessageError,
    chunk_actions,
    joint_state_message,
    parsed,
    stamped_joint_positions,
)
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.settings import SAFETY

NOT_SAID = "no step queued"  # a hold the arm node counts on /diagnostics without a log line


class ArmNode(Node):
    def __init__(self, arm=None, **node_options):
        """`arm`: an ArmInterface to drive instead of the SO-101 the parameters name (tests, other arms)."""
        super().__init__("act_so101", **node_options)
        values = declare_node(self, "act_so101")
        get = values.__getitem__
        self.fps = float(get("fps"))
        safety = SafetyConfig(fps=self.fps, **{name: values[name] for name in SAFETY})
        rest = list(get("rest_pose"))
        if len(rest) not in (1, len(so101.JOINT_NAMES)):
            raise ValueError(f"rest_pose has {len(rest)} values, expected {len(so101.JOINT_NAMES)} (radians) or one "
                             f"(no move)")
        self.rest = np.array(rest, float) if len(rest) == len(so101.JOINT_NAMES) else None
        self.rest_seconds = float(get("rest_seconds"))
        if arm is None:
            if not get("port"):
                raise ValueError("parameter 'port' is empty: give the follower's serial port, e.g. /dev/ttyACM0")
            relative = float(get("lerobot_max_relative_target_deg"))
            arm = SO101FollowerArm(get("port"), get("robot_id"), get("calibration_dir") or None,
                                   checkpoint_units=get("checkpoint_units"),
                                   max_relative_target_deg=relative if relative > 0 else None)
        self.dry_run = bool(get("dry_run"))
        if not math.isfinite(get("ensemble_coeff")):
            raise ValueError(f"parameter ensemble_coeff must be finite, got {get('ensemble_coeff')}")
        self.control = ArmController(arm, safety, merge=get("merge"), stale_after_s=float(get("stale_after_s")),
                                     ensemble_coeff=float(get("ensemble_coeff")),
                                     status_every=int(get("status_every")), dry_run=self.dry_run)
        self.joint_pub = self.create_publisher(JointState, "joint_states", SENSOR)
        chunks, services = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        # the goal written each tick, after the safety chain, stamped with the tick's read: a recorder's action
        self.command_pub = self.create_publisher(JointState, "act/joint_command", COMMANDS)
        if get("command_source") == "leader":
            self.create_subscription(JointState, "leader/joint_states", parsed(
                self, stamped_joint_positions, "leader joint state", self.on_leader, 2.0), SENSOR,
                callback_group=chunks)
        else:
            self.create_subscription(JointTrajectory, "act/action_chunk", self.on_chunk, RELIABLE,
                                     callback_group=chunks, raw=True)  # chunk_actions reads the bytes
        for name, action in (("~/stop", self.control.stop), ("~/estop", self.control.estop),
                             ("~/reset", self.control.reset)):
            self.create_service(Trigger, name, lambda request, response, act=action: self.on_service(act, response),
                                callback_group=services)
        self.diagnostics = Diagnostics(self, "SO-101 arm", self.fill_diagnostics, arm.__class__.__name__,
                                       callback_group=services)
        self.published = 0  # joint_states, one per completed read
        self.loop_periods: list[float] = []  # seconds between tick starts, for bench/bench_arm.py
        self._previous: tuple[float, np.ndarray] | None = None
        self._held = ""  # why the arm holds now ("": it follows a command), said once at each change
        self._running = threading.Event()
        self._running.set()
        self._closed = False
        self._loop = threading.Thread(target=self.bus_loop, name="arm-bus", daemon=True)
        # the arm starts last: nothing after torque is on may fail and leave it torqued (a SIGTERM during
        # construction invalidates the context, and creating a publisher then raises)
        measured = self.control.start()  # ArmConfigurationError: the runner says why and exits 2
        try:
            self._loop.start()
        except BaseException:
            self.control.shutdown()
            raise
        self.get_logger().info(f"arm {'DRY RUN (no torque, no goals) ' if self.dry_run else ''}at "
                               f"{np.round(measured, 3).tolist()} rad, {self.fps:g} fps, velocity bound "
                               f"{safety.max_velocity_rad_s} rad/s, range {np.round(self.control.chain.lower, 2)} .. "
                               f"{np.round(self.control.chain.upper, 2)}")

    # --- the bus loop (its own thread) -------------------------------------------------------------------
    def bus_loop(self) -> None:
        period = 1.0 / self.fps
        due = time.monotonic()
        last_start = None
        while self._running.is_set():
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            started = time.monotonic()
            if last_start is not None:
                self.loop_periods.append(started - last_start)
            last_start = started
            result = self.control.tick(time.time())
            if result.decision is not None:
                self.say_hold(result.decision.reason)  # "" when a goal was written (the chain's hold_reason too)
            if result.reading is not None:
                self.publish_joints(result.reading.positions, result.reading.stamp_s)
                if result.wrote:  # a dry run, a stop or a latched fault writes nothing: no command was applied
                    goal = result.decision.goal
                    self.command_pub.publish(joint_state_message(goal, np.zeros_like(goal), result.reading.stamp_s))
            elif result.error:
                self.get_logger().error(f"bus read failed: {result.error}", throttle_duration_sec=1.0)
            due += period
            if time.monotonic() - due > period:  # more than a tick late: skip ahead rather than burst
                due = time.monotonic()

    def say_hold(self, reason: str) -> None:
        """Log once when the arm starts holding (a policy gone quiet: "chunk stale", a stop, a fault), and
        when it follows again; the reason stays on /diagnostics while it lasts. A chunk run out before the
        next one ("no step queued", a tick or two when inference is slow) is counted there, not logged."""
        if reason == NOT_SAID or reason == self._held:
            return
        if reason:
            self.get_logger().warn(f"holding the arm: {reason} (said once until it changes)")
        else:
            self.get_logger().info(f"following commands again after holding ({self._held})")
        self._held = reason

    def publish_joints(self, positions: np.ndarray, stamp_s: float) -> None:
        velocities = np.zeros_like(positions)
        if self._previous is not None and stamp_s > self._previous[0]:
            velocities = (positions - self._previous[1]) / (stamp_s - self._previous[0])
        self._previous = (stamp_s, positions)
        self.joint_pub.publish(joint_state_message(positions, velocities, stamp_s))
        self.published += 1

    # --- chunks and services (executor threads) ------------------------------------------------------------
    def on_leader(self, leader: tuple[float, np.ndarray]) -> None:
        """A leader arm's pose, followed from now for LEADER_HOLD_S through the executor and the safety chain."""
        now = time.time()
        reason = self.control.add_chunk(now, hold_chunk(leader[1], now, self.fps).actions, now)
        if reason:
            self.get_logger().warn(f"leader pose not followed: {reason}", throttle_duration_sec=2.0)

    def on_chunk(self, message: bytes) -> None:
        now = time.time()
        try:
            stamp, actions = chunk_actions(message, self.fps)
            reason = self.control.add_chunk(stamp, actions, now)
        except MessageError as error:
            reason = self.control.add_chunk(0.0, None, now, problem=str(error))
        if reason:
            self.get_logger().warn(f"chunk rejected: {reason}")

    def on_service(self, action, response: Trigger.Response) -> Trigger.Response:
        message = action()
        response.success = not message.startswith("not ")
        response.message = message
        self.get_logger().warn(message)
        return response

    def fill_diagnostics(self, report: Report) -> bool:
        if self.control.chain is None:
            return False
        chain, stats, ledger = self.control.chain, self.control.stats, self.control.ledger
        if chain.state in ("fault", "estopped") or any(s.error_bits or not s.answered for s in stats.statuses):
            report.error(chain.faults[0] if chain.faults else chain.state)
        elif chain.state != "running":
            report.warn(chain.state)
        elif chain.hold_reason:
            report.warn(f"holding: {chain.hold_reason}")
        elif stats.read_failures:
            report.warn(f"{stats.read_failures} failed reads")
        report.update({
            "state": chain.state, "faults": "; ".join(chain.faults), "hold_reason": chain.hold_reason,
            "dry_run": self.dry_run, "clamps": chain.clamps, "executor_clamps": stats.executor_clamps,
            "holds": chain.holds, "ticks": stats.ticks, "reads": stats.reads, "read_failures": stats.read_failures,
            "writes": stats.writes, "write_failures": stats.write_failures,
            "last_bus_error": stats.last_error, "joint_states_published": self.published,
            "chunks_received": ledger.received, "chunks_applied": ledger.applied,
            "chunks_rejected": "; ".join(f"{k}: {v}" for k, v in ledger.rejected.items()) or "none",
        })
        for s in stats.statuses:
            report.add(f"{s.name}.flags", ", ".join(s.flags) if s.answered else "no answer")
            report.add(f"{s.name}.voltage_v", f"{s.voltage_v:.1f}")
            report.add(f"{s.name}.temperature_c", f"{s.temperature_c:.0f}")
        if not report.message:
            report.message = chain.faults[0] if chain.faults else chain.state
        return True

    # --- shutdown ------------------------------------------------------------------------------------------
    def close(self) -> list[str]:
        """Stop the loop, optionally move to the rest pose, torque off on every servo that answers, close the
        port. Returns the servos that did not answer. Safe to call twice."""
        if self._closed:
            return []
        self._closed = True
        self._running.clear()
        self._loop.join(timeout=2.0)
        dead = self.control.shutdown(self.rest, self.rest_seconds)
        text = f"torque off and port closed{'; no answer from ' + str(dead) if dead else ''}"
        print(f"act_so101: {text}", flush=True)  # the logger may be gone during a launch shutdown
        return dead

    def destroy_node(self) -> None:
        self.diagnostics.final()  # the arm's figures as it stops, before the bus is let go
        self.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(ArmNode, "act_so101_node", args)


if __name__ == "__main__":
    main()
