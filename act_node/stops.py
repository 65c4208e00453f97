"""Stopping long work cleanly on Ctrl-C or SIGTERM: the signals that mean "stop", and a handler that only asks.

A recording, an evaluation or a node that is killed in the middle of a write loses what it was writing; these
let the work stop at its next safe point instead (act_node.record, act_node.episodes, act_node.nodes.runner).
"""

from __future__ import annotations

import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# a node's exit code when it refused to start (a bad parameter, a missing or wrong checkpoint): started again it
# would refuse again, so a launcher ends the graph on it even under respawn:=true (act_node.nodes.runner)
REFUSED = 2


class StopRequests:
    """While active (a context manager), SIGINT and SIGTERM set `signal_name` instead of killing the
    process or raising KeyboardInterrupt in the middle of a write. Outside the main thread, where Python
    cannot take signals, it does nothing. Child processes forked meanwhile (LeRobot's video encoders,
    which a terminal's Ctrl-C reaches too) inherit the same handlers, so they finish their episode."""

    def __init__(self):
        self.signal_name: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._request)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _request(self, number: int, _frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(number).name
            print(f"\n{self.signal_name}: stopping after this step; the episode in progress is dropped, the "
                  f"completed ones are kept", file=sys.stderr, flush=True)
        else:
            print(f"\n{signal.Signals(number).name}: already stopping (saving what is complete)", file=sys.stderr,
                  flush=True)


# --- a node that outlives its launcher ---------------------------------------------------------------------
# `ros2 launch` (jazzy) stops its nodes on SIGINT only. On SIGTERM to the launch process alone (`kill PID`,
# supervisord's default stop, a container runtime signalling its main process) it installs no Python handler,
# dies by the signal's default action, and its nodes keep running, orphaned (ros2/launch#666): the policy would
# go on sending chunks and an arm node on following them. The launch files put their own PID in each node's
# environment; the node asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), the same stop as a
# supervisor's SIGTERM. `act-sim launch` sets the same from its side before each node starts (graph.py).
LAUNCHER_VARIABLE = "ACT_NODE_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def parent_death_signal():
    """A function that asks the kernel for SIGTERM to the calling process when its parent dies, even by SIGKILL
    (prctl PR_SET_PDEATHSIG; it returns prctl's result, 0 on success). prctl is looked up here, so the function
    is also safe as a forked child's preexec_fn (`act-sim launch`, graph.py)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def die_with_parent() -> int:
        return prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return die_with_parent


def launcher_environment() -> dict[str, str]:
    """What a launch file adds to each node's environment: this (the launch) process's PID."""
    import os

    return {LAUNCHER_VARIABLE: str(os.getpid())}


class LauncherGone(Exception):
    """The launch process that started this node has already ended: the node should not start."""


def _running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie, ended but not yet reaped by its parent, has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def stop_with_launcher(environ=None) -> str | None:
    """In a node started by a launch file (LAUNCHER_VARIABLE set): SIGTERM to this process when its parent dies.
    Returns what it did, for the node's log, or None (not launched so, or not Linux). Raises LauncherGone if the
    launcher ended before this (the kernel would send nothing then), ValueError naming a value that is not a PID.

    The kernel watches the parent: the launcher itself, or a wrapper between them (ros2 launch's
    --launch-prefix), which this says."""
    import ctypes
    import os

    environ = os.environ if environ is None else environ
    value = environ.get(LAUNCHER_VARIABLE)
    if value is None or sys.platform != "linux":
        return None
    try:
        launcher = int(value)
    except ValueError:
        raise ValueError(f"{LAUNCHER_VARIABLE}={value!r} is not a process ID (the launch file sets it)") from None
    if launcher < 1:  # 1 is one: `ros2 launch` as a container's main process
        raise ValueError(f"{LAUNCHER_VARIABLE}={value!r} is not a process ID (the launch file sets it)")
    if parent_death_signal()() != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}")
    parent = os.getppid()  # after the prctl: a launcher that dies from here on is signalled
    if parent == launcher:
        return f"stops with its launcher (PID {launcher})"
    if not _running(launcher):
        raise LauncherGone(f"its launcher (PID {launcher}) has ended: not starting")
    return f"stops with its parent (PID {parent}), which the launcher (PID {launcher}) started"
