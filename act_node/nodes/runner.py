"""The one `main` every node shares: init, build, spin, clean up, and an exit code that says how it went.

    build ──refused (bad parameter, wrong checkpoint)──> one line on stderr, exit 2
      │  ──a bug──> its traceback, exit 1
    spin ──the node's `done` future completes with a code──> that code (the sim: 0 once its episodes are done)
      │  ──Ctrl-C, SIGTERM, a shutdown from outside──> exit 0; a `work_left()` the stop cut short is said
      │  ──a bug in a callback──> its traceback, exit 1
    clean up, in this order: the node (its own threads first, then its entities), then rclpy; then the
    process ends at once (os._exit); a stop signal now changes nothing

`ros2 launch` and `act-sim launch` both stop a graph with SIGINT, and a terminal's Ctrl-C sends one
more to every process of the group: the second arrives while the node cleans up, so no signal may raise
KeyboardInterrupt here, and only this module handles them: rclpy is initialised without its own signal
handlers. Those would shut the context down from rclpy's signal thread at once, under the node's feet: a
thread of the node still publishing or logging then failed ("inference failed: RCLError(... context is
invalid)", "Failed to publish log message to rosout"). Here the signal is only noted; the spin loop sees it
within POLL_S, and the node is destroyed while its context is still valid, the context shut down after.

A node stopped by a signal exits 0 ("finished cleanly" to launch, which logs every other code as an ERROR).
One with a `work_left()` that names what the stop cut short (the sim's episodes still to run) says so on
stderr; the stop was asked for, so it is not a failure of the node.

The end: after the cleanup above, Python's own exit would tear down every module (torch, LeRobot, pandas,
pyarrow, Fast DDS' bindings): seconds of garbage collection on a loaded machine, with SIGINT and SIGTERM
ignored (see _exit), so that launch's SIGTERM after 5 s and its SIGKILL after 10 s found a node that had
finished everything but that (gdb on a policy node 2.5 s after SIGINT: Py_FinalizeEx -> finalize_modules ->
gc_collect_main; faulthandler at 4 s: no Python frame left). Nothing of the node needs it once it is
destroyed: the process ends with os._exit, unless a thread that is not a daemon still runs (then Python's
exit joins it, as it would have).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from act_node.stops import REFUSED, STOP_SIGNALS, LauncherGone, stop_with_launcher

FAILED = 1  # exit code for a bug
# Start-up errors that are the user's input, not a bug: one line each. The policy's CheckpointMismatch
# is a ValueError; rclpy's bad parameter types and out-of-range values are ParameterExceptions.
REFUSALS = (ValueError, FileNotFoundError, ParameterException)
# How often the spin loop looks at the signals StopSignals noted: the longest a stop waits to be seen, since
# no rclpy handler wakes the executor (rclpy.spin() would wait for ever once the graph has gone quiet).
POLL_S = 0.1
# A node still running this long after a stop signal writes the stack of every thread to stderr (faulthandler:
# "Timeout (0:00:04)!", then each thread, most recent call first), so a stop that hangs says where it waits.
# It is re-armed by each signal: `ros2 launch` sends SIGTERM 5 s after SIGINT and SIGKILL 5 s after that,
# `act-sim launch` 10 s apart (graph.STOP_S), so each dump comes before the harder signal. faulthandler's own
# thread writes it, without the GIL, also while the interpreter finalizes. SIGUSR1 dumps the same at any time.
STACKS_AFTER_S = 4.0
DUMP_SIGNAL = signal.SIGUSR1


class StopSignals:
    """The handler for SIGINT and SIGTERM: it notes the first signal, arms the stack dump, and never raises.

    The only handler: rclpy is initialised without its own (see the module doc), and a KeyboardInterrupt
    would land wherever the main thread is, in destroy_node too when a second SIGINT comes during cleanup."""

    def __init__(self) -> None:
        self.received: int | None = None
        for number in STOP_SIGNALS:
            signal.signal(number, self)

    def __call__(self, number: int, _frame) -> None:
        if self.received is None:
            self.received = number
        faulthandler.dump_traceback_later(STACKS_AFTER_S, exit=False)  # cancelled only by the process's end


def _exit(code: int | str | None) -> None:
    """End the process once the node is destroyed and rclpy shut down, with sys.exit's meaning of `code`.

    SIGINT and SIGTERM are ignored from here on: Python's finalization puts the default handlers back for
    the signals it handled, and a signal then would kill the node with -2 or -15 instead of its exit code.
    Then os._exit, without the interpreter's teardown (the module doc says why), unless a thread that is
    not a daemon still runs: Python's exit joins those first, so they are left to it."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("text"): the text on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    logging.shutdown()  # what Python's exit would flush: logging's handlers, then stdout and stderr
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said there
            pass
    os._exit(status)


def run(make_node: Callable[[], Node], label: str, args: list[str] | None = None) -> None:
    """Run one node until it is done or stopped; exit with a code that says which (see the module doc)."""
    faulthandler.register(DUMP_SIGNAL, all_threads=True)  # kill -USR1 <pid>: where every thread is
    signals = StopSignals()
    try:  # started by a launch file: SIGTERM when the launcher dies (act_node.stops says why)
        following = stop_with_launcher()
    except LauncherGone as gone:  # before anything starts: an arm node would turn torque on first
        print(f"{label}: {gone}", file=sys.stderr)
        _exit(0)
    except (ValueError, OSError) as error:
        print(f"{label}: refusing to start: {error}", file=sys.stderr)
        _exit(REFUSED)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
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
    if following:
        node.get_logger().debug(following)

    code: int | str | None = 0
    stopped = False
    executor = None
    try:
        done = getattr(node, "done", None)  # a node whose work ends (the sim's episodes) completes this future
        executor = rclpy.get_global_executor() if rclpy.ok() else None
        if executor is not None:
            executor.add_node(node)
        # rclpy.spin() would wait for ever here: see POLL_S
        finished = lambda: done is not None and done.done()  # noqa: E731
        while executor is not None and rclpy.ok() and signals.received is None and not finished():
            executor.spin_once(timeout_sec=POLL_S)
        if finished():
            code = done.result()
        else:  # a signal noted by StopSignals, or rclpy shut down from another thread
            stopped = True
    except ExternalShutdownException:  # rclpy.shutdown() from another thread
        stopped = True
    except SystemExit as exit_:  # the node ended its own work
        code = exit_.code
    except Exception:
        if rclpy.ok():
            raise  # a bug in a callback
        # rclpy shut down from another thread between the executor's check and its wait: rclpy raises
        # RCLError ("the given context is not valid") instead of ExternalShutdownException
        stopped = True
    finally:  # also after a bug in a callback, whose traceback follows the cleanup
        stopped = stopped or signals.received is not None
        work_left = getattr(node, "work_left", None)
        left = work_left() if stopped and callable(work_left) else None
        if executor is not None:
            executor.remove_node(node)
        node.destroy_node()  # the node's threads end and its entities go while the context is valid
        rclpy.try_shutdown()  # nothing of the node logs through rclpy after this
    if left:
        print(f"{label}: stopped with work left: {left}", file=sys.stderr)
    _exit(code)
