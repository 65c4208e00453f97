"""What C code prints, kept out of a command's output.

pybullet prints "pybullet build time: ..." with printf when it is imported (on stderr in the PyPI wheel), and its EGL
plugin reports its device, GL vendor and version on stdout: text on file descriptors 1 and 2, which Python's
sys.stdout and sys.stderr do not see and cannot silence, and which would land in every `act-sim` command's output
and every launch's log. `quiet_pybullet()` is the one import of pybullet (the banner dropped, anything else it
says passed on to stderr); `c_output_aside()` sets the descriptors aside around any other C call that prints.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import ModuleType

_C_LIBRARY = ctypes.CDLL(None)  # this process's C library: its fflush
PYBULLET_BANNER = "pybullet build time:"


@contextmanager
def c_output_aside(active: bool = True, keep: bool = False, fds: tuple[int, ...] = (1,)) -> Iterator[list[str]]:
    """What C code prints meanwhile on the descriptors `fds` (stdout), when `active`, goes nowhere. With `keep`
    the text comes back in the yielded list once the block ends, one entry per descriptor (a caller quotes it
    when something failed); without, it is dropped (/dev/null: no scratch file for each EGL frame)."""
    said: list[str] = []
    if not active:
        yield said
        return
    sys.stdout.flush()
    sys.stderr.flush()
    with ExitStack() as stack:
        sinks = [stack.enter_context(tempfile.TemporaryFile() if keep else open(os.devnull, "wb")) for _ in fds]
        saved = [os.dup(fd) for fd in fds]
        try:
            for fd, sink in zip(fds, sinks):
                os.dup2(sink.fileno(), fd)
            yield said
        finally:
            _C_LIBRARY.fflush(None)  # C's buffers, to the sinks and not to the restored descriptors
            for fd, copy in zip(fds, saved):
                os.dup2(copy, fd)
                os.close(copy)
            if keep:
                for sink in sinks:
                    sink.seek(0)
                    said.append(sink.read().decode(errors="replace"))


def quiet_pybullet() -> ModuleType:
    """The pybullet module, imported without its build-time banner; whatever else it prints at import goes to
    stderr (and an import that fails raises as ever)."""
    if "pybullet" in sys.modules:
        return sys.modules["pybullet"]
    try:
        with c_output_aside(keep=True, fds=(1, 2)) as said:
            import pybullet
    finally:
        other = [line for text in said for line in text.splitlines() if not line.startswith(PYBULLET_BANNER)]
        if other:
            print("\n".join(other), file=sys.stderr)
    return pybullet
