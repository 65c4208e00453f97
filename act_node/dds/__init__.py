"""The Fast DDS profile act_node's nodes run with, and the environment a launcher sets for each node.

Camera frames of 480x640 and up outgrow Fast DDS's default shared-memory segment (512 KiB per process):
with best effort most frames are lost, with reliable QoS they crawl (fastdds.xml says why). The profile
gives each process a 32 MiB segment and a deeper port queue, and keeps UDP for discovery and other hosts.

Fast DDS reads the file named by FASTRTPS_DEFAULT_PROFILES_FILE (2.x, what ROS 2 Jazzy ships) or
FASTDDS_DEFAULT_PROFILES_FILE (3.x) once, when a process creates its first participant, so the variables
must be in a node's environment before it starts; a launcher (`act-sim launch`, launch/sim.launch.py) adds
`profile_environment()` to each node's environment.

What it changes for a node in the same domain that does not load it (a user's own camera driver or viewer):
  - receiving large images from act_node's nodes now gets them whole: the segment that fills up belongs
    to the writer, and act_node's writers have the large one (bench/bench_transport.py, "writer only");
  - publishing large images to act_node's nodes still loses frames, because the user's writer keeps the
    default segment: start it with these variables too, e.g.
    FASTRTPS_DEFAULT_PROFILES_FILE=$(python -c "import act_node.dds as d; print(d.PROFILE)") ros2 run ...;
  - discovery, QoS and every other host behave as before (UDP is configured as Fast DDS's default).
Each process that loads the profile maps its 32 MiB segment in /dev/shm (Docker's default of 64 MiB holds one:
run containers with --shm-size or --ipc=host).
Nothing changes for nodes on another RMW (RMW_IMPLEMENTATION=rmw_cyclonedds_cpp ignores the file).

The environment also carries glibc malloc tunables. rclpy and Fast DDS allocate a fresh buffer for each copy
of a frame; glibc serves blocks that large with mmap and unmaps them on free, so every copy page-faults its
way through new memory (what it costs a 720x1280 Image: bench/bench_transport.py's stage costs,
docs/measured_defaults.md). Keeping such blocks on the heap (mmap threshold 32 MiB) and
not returning freed heap below 128 MiB to the system turns them into reused, already-mapped memory, at the
price of each node keeping that much freed memory. glibc reads GLIBC_TUNABLES when a process starts; other C
libraries ignore it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PROFILE = Path(__file__).with_name("fastdds.xml")
# Fast DDS 2.x reads the first, 3.x the second; both name the same file
PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
# bytes: blocks below the first come from the heap, freed heap below the second stays mapped
MALLOC_TUNABLES = {"glibc.malloc.mmap_threshold": 32 * 2**20, "glibc.malloc.trim_threshold": 128 * 2**20}


def profile_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a launcher adds to (or replaces in) a node's environment: the profile's file names and
    GLIBC_TUNABLES with the malloc thresholds added.

    What the user already set in `environ` (default: os.environ) wins: a profile file of their own (then it is
    responsible for the shared-memory segment, see fastdds.xml) and any malloc tunable they gave.
    """
    environ = os.environ if environ is None else environ
    variables = {}
    if not any(environ.get(name) for name in PROFILE_VARIABLES):
        if not PROFILE.is_file():
            raise FileNotFoundError(f"act_node's Fast DDS profile is missing at {PROFILE} (a broken install?)")
        variables.update({name: str(PROFILE) for name in PROFILE_VARIABLES})
    tunables = environ.get("GLIBC_TUNABLES", "")
    given = {item.split("=")[0] for item in tunables.split(":") if item}
    missing = [f"{name}={value}" for name, value in MALLOC_TUNABLES.items() if name not in given]
    if missing:
        variables["GLIBC_TUNABLES"] = ":".join([*([tunables] if tunables else []), *missing])
    return variables
