"""The one `main` every node shares: init, build, spin, clean up, and an exit code that says how it went.

    build ──refused (bad parameter, wrong checkpoint)──> one line on stderr, exit 2
      │  ──a bug──> its traceback, exit 1
    spin ──the node's `done` future completes with a code──> that code (the sim: 0 once its episodes are done)
      │  ──Ctrl-C, SIGTERM, a shutdown from outside──> exit 0, or 1 when the node says work is left
      │  ──a bug in a callback──> its traceback, exit 1
    clean up (destroy the node, shut rclpy down); a stop signal now changes nothing

`ros2 launch` and `act-sim launch` both stop a graph with SIGINT, and a terminal's Ctrl-C sends one
more to every process of the group: the second arrives while the node cleans up, so no signal may raise
KeyboardInterrupt here: rclpy's handlers shut the context down, which ends spin(), and Python's handler
only notes the signal (a KeyboardInterrupt would land inside destroy_node).
A node stopped by a signal exits 0 ("finished cleanly" to launch) unless it has a `work_left()` that
names what the stop cut short (the sim's episodes still to run): then it says so and exits 1.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from act_node.stops import STOP_SIGNALS

REFUSED = 2  # exit code for a node that refused to start: a bad parameter, a missing or wrong checkpoint
FAILED = 1  # exit code for a bug, or a stop that cut the node's work short
# Start-up errors that are the user's input, not a bug: one line each. The policy's CheckpointMismatch
# is a ValueError; rclpy's bad parameter types and out-of-range values are ParameterExceptions.
REFUSALS = (ValueError, FileNotFoundError, ParameterException)
# How often the spin loop looks at the signals StopSignals noted. rclpy.spin() alone can miss a stop for
# good: rclpy's handler wakes the executor (a guard condition) and only then, from its own thread, shuts the
# context down; an executor that woke and found the context still up waits again, and nothing wakes it
# once the graph around it has gone quiet (seen: the policy node ignoring the SIGINT that ends a graph, 2
# runs of 6). Python's handler runs as soon as the main thread leaves that wait, so a bounded wait ends it.
POLL_S = 0.1


class StopSignals:
    """Python's handler for SIGINT and SIGTERM: it only notes the first signal, and never raises.

    rclpy's own handlers (installed by rclpy.init, in front of this one, which they chain to) shut the
    context down, and that ends spin() with ExternalShutdownException. A KeyboardInterrupt instead would
    land wherever the main thread is, in destroy_node too when a second SIGINT comes during cleanup.
    Installed before rclpy.init, so that rclpy's shutdown puts this one back, not the default ones."""

    def __init__(self) -> None:
        self.received: int | None = None
        for number in STOP_SIGNALS:
            signal.signal(number, self)

    def __call__(self, number: int, _frame) -> None:
        if self.received is None:
            self.received = number


def _exit(code: int | str | None) -> None:
    """Exit once rclpy is shut down: SIGINT and SIGTERM ignored from here on. Python's finalization
    (long after torch) puts the default handlers back for the signals it handled, and a signal then
    would kill the node with -2 or -15 instead of its exit code."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    sys.exit(code)


def run(make_node: Callable[[], Node], label: str, args: list[str] | None = None) -> None:
    """Run one node until it is done or stopped; exit with a code that says which (see the module doc)."""
    signals = StopSignals()
    rclpy.init(args=args)
    try:
        node = make_node()
    except REFUSALS as error:
        print(f"{label}: refusing to start: {error}", file=sys.stderr)
        rclpy.try_shutdown()
        _exit(REFUSED)
    except Exception:
        rclpy.try_shutdown()
        if signals.received is not None:  # a stop during the build made an rclpy call fail: not a bug
            _exit(0)
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise  # a bug: keep its traceback

    code: int | str | None = 0
    stopped = False
    executor = None
    try:
        done = getattr(node, "done", None)  # a node whose work ends (the sim's episodes) completes this future
        # a stop signal as the build ended may have shut the context down: no executor can be made then
        executor = rclpy.get_global_executor() if rclpy.ok() else None
        if executor is not None:
            executor.add_node(node)
        # rclpy.spin() would wait for ever here: see POLL_S
        finished = lambda: done is not None and done.done()  # noqa: E731
        while executor is not None and rclpy.ok() and signals.received is None and not finished():
            executor.spin_once(timeout_sec=POLL_S)
        if finished():
            code = done.result()
        else:  # a signal: noted by StopSignals, or the context shut down by rclpy's handler
            stopped = True
    except ExternalShutdownException:  # SIGINT, SIGTERM, or rclpy.shutdown() from another thread
        stopped = True
    except SystemExit as exit_:  # the node ended its own work
        code = exit_.code
    except Exception:
        if rclpy.ok():
            raise  # a bug in a callback
        # a signal shut the context down between the executor's check and its wait: rclpy raises
        # RCLError ("the given context is not valid") instead of ExternalShutdownException
        stopped = True
    finally:  # also after a bug in a callback, whose traceback follows the cleanup
        # spin() can also return quietly when a signal shuts the context down between two of its turns
        stopped = stopped or signals.received is not None
        work_left = getattr(node, "work_left", None)
        left = work_left() if stopped and callable(work_left) else None
        if executor is not None:
            executor.remove_node(node)
        node.destroy_node()
        rclpy.try_shutdown()
    if left:
        print(f"{label}: stopped with work left: {left}", file=sys.stderr)
        code = FAILED
    _exit(code)
