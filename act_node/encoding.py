"""Saving a LeRobot episode without handing the machine to its video encoder.

LeRobot writes a dataset's camera streams with SVT-AV1 (through PyAV, in the saving process). When that process runs
as root (euid 0, as in most containers and on many robot computers), SVT-AV1 raises the thread that encodes, and
every thread it starts, to real-time priority: SCHED_FIFO 99. Measured with PyAV's libsvtav1 here: the saving
thread stays at FIFO 99 after the encoder is closed, so every thread and process it starts afterwards (an executor's
thread, a launched node) inherits it, and a FIFO thread that loops without sleeping owns a core outright; while the
encoder runs, its threads take the cores from every ordinary process, the arm's control loop among them.

`save_episode` saves with the capability that allows it (CAP_SYS_NICE) out of the calling thread's effective set:
SVT-AV1's raise then fails (a warning it prints only at SVT_LOG 2 or more) and it encodes at the thread's own
priority. The capability stays permitted and comes back afterwards; a thread that some earlier encode left at
real-time priority is set back to the policy it should have had. Nothing changes for a process that is not root.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager

CAP_SYS_NICE = 23
_CAPABILITY_VERSION_3 = 0x20080522  # two 32-bit words per set
REALTIME_POLICIES = (os.SCHED_FIFO, os.SCHED_RR)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _capabilities() -> tuple[_CapHeader, ctypes.Array]:
    """The calling thread's capability sets (pid 0: this thread)."""
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc().capget(ctypes.byref(header), data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capget: {os.strerror(error)}")
    return header, data


def _set_effective(capability: int, on: bool) -> None:
    header, data = _capabilities()
    word, bit = divmod(capability, 32)
    if on:
        data[word].effective |= 1 << bit
    else:
        data[word].effective &= ~(1 << bit)
    if _libc().capset(ctypes.byref(header), data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")


def _effective(capability: int) -> bool:
    _, data = _capabilities()
    word, bit = divmod(capability, 32)
    return bool(data[word].effective & (1 << bit))


def realtime_threads(pid: int | None = None) -> dict[int, str]:
    """The threads of process `pid` (this one by default) that run at real-time priority: {tid: "FIFO 99"}."""
    found = {}
    for task in glob.glob(f"/proc/{pid or os.getpid()}/task/*"):
        tid = int(task.rsplit("/", 1)[1])
        try:
            policy = os.sched_getscheduler(tid)
            if policy in REALTIME_POLICIES:
                found[tid] = f"{'FIFO' if policy == os.SCHED_FIFO else 'RR'} {os.sched_getparam(tid).sched_priority}"
        except (ProcessLookupError, PermissionError):  # the thread ended meanwhile, or is another user's
            continue
    return found


@contextmanager
def ordinary_priority() -> Iterator[None]:
    """The calling thread, and the threads it starts meanwhile, cannot raise themselves to real-time priority
    (root only: CAP_SYS_NICE out of the thread's effective set, back afterwards). On the way out, a thread left at
    real-time priority that entered without it goes back to the policy and priority it entered with."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    dropped = False
    try:
        if os.geteuid() == 0 and _effective(CAP_SYS_NICE):
            _set_effective(CAP_SYS_NICE, False)
            dropped = True
    except OSError:  # capget/capset refused (a seccomp filter): the policy is still put back on the way out
        pass
    try:
        yield
    finally:
        if dropped:
            _set_effective(CAP_SYS_NICE, True)
        if policy not in REALTIME_POLICIES and os.sched_getscheduler(0) in REALTIME_POLICIES:
            os.sched_setscheduler(0, policy, param)


def save_episode(dataset) -> None:
    """LeRobot's `dataset.save_episode`, its videos encoded in this thread at this thread's own priority, one camera
    after the other: LeRobot's parallel encoding forks the process, and a fork of a process with threads (rclpy's,
    tqdm's monitor) can hang in the child on a lock held at the fork."""
    with ordinary_priority():
        dataset.save_episode(parallel_encoding=False)
