"""Claiming ROS domains on this machine for graphs that must not hear each other (test runs, benchmarks).

A domain chosen from the pid alone collided now and then with a concurrent run on the same machine, whose
latched episode starts then reached the other run's nodes. A claim is an exclusive lock on a file under the
temporary folder, held as long as the returned handle is open (in practice: until the process exits).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO

FIRST_DOMAIN = 100
BLOCK = 3  # domains a claim covers: the claimer's own, then +1 and +2 for the graphs it starts
BLOCKS = 44  # domains 100..231; Fast DDS allows domain ids up to 232


def claim_domains() -> tuple[int, IO]:
    """(the first domain of a block of three nobody here holds, the open lock file that holds it)."""
    folder = Path(tempfile.gettempdir()) / "act_node_ros_domains"
    folder.mkdir(exist_ok=True)
    for k in range(BLOCKS):
        block = (os.getpid() + k) % BLOCKS
        handle = open(folder / f"{block}.lock", "w")  # noqa: SIM115 (kept open: the lock lives with it)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return FIRST_DOMAIN + BLOCK * block, handle
    raise RuntimeError(f"all {BLOCKS} ROS domain blocks under {folder} are held by other runs")
