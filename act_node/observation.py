"""The observation a policy reads, built in one place, and matching one across topics by header stamps.

`build_observation` makes the env's dict (LeRobot's gym convention: `agent_pos`, `environment_state`, `pixels`)
from the joints in radians, the images and the target: the env, the policy node and the recorders call it, so
what is recorded is what is served. `dataset_frame` turns that dict and an action into a LeRobotDataset frame.

Each source (the joint states, every camera) keeps its recent messages; the newest observation is the
newest stamp of the first source that every other source matches within `skew_s`. Messages may arrive
late, out of order or not at all: a stamp some source lacks is skipped for an older complete one.
`newest_anchor` and `offsets` say why the newest one is not complete (a camera's nearest frame seconds before
or after it, or none at all): the policy node refuses a stale or impossible observation with that reason.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np

from act_node import so101
from act_node.table_frame import (  # noqa: F401 (the layouts' names are read from here too)
    ENV_LAYOUTS,
    JOINT_LAYOUTS,
    KIND_NAMES,
    TOOL_NAMES,
    YAW_NAMES,
    environment_layout,
    environment_state_names,
    kind_index,
)

BUFFER = 60  # messages kept per source: two seconds at 30 Hz


class ObservationMatcher:
    """Recent (stamp, value) pairs per source; `newest()` finds the newest stamp all sources share."""

    def __init__(self, sources: list[str], skew_s: float, buffer: int = BUFFER):
        if not sources:
            raise ValueError("an observation needs at least one source")
        if skew_s < 0:
            raise ValueError(f"skew_s must be >= 0, got {skew_s}")
        self.skew_s = skew_s
        self.buffers: dict[str, deque[tuple[float, object]]] = {name: deque(maxlen=buffer) for name in sources}

    def add(self, source: str, stamp_s: float, value) -> None:
        if source not in self.buffers:
            raise KeyError(f"unknown source {source!r}; sources are {list(self.buffers)}")
        self.buffers[source].append((stamp_s, value))

    def clear(self) -> None:
        for buffer in self.buffers.values():
            buffer.clear()

    def newest(self, after_s: float = -math.inf,
               accept: Callable[[float], bool] = lambda stamp: True) -> tuple[float, dict] | None:
        """(stamp, {source: value}) for the newest stamp of the first source that every other source
        matches within the skew bound (each with its nearest stamp); only stamps after `after_s` that
        `accept` takes. None when no such observation is complete."""
        anchor, *others = self.buffers
        for stamp, value in sorted(self.buffers[anchor], key=lambda item: -item[0]):
            if stamp <= after_s:
                return None
            if not accept(stamp):
                continue
            match = {anchor: value}
            for source in others:
                best = self._nearest(source, stamp)
                if best is None or abs(best[0] - stamp) > self.skew_s:
                    break
                match[source] = best[1]
            else:
                return stamp, match
        return None

    def newest_anchor(self, after_s: float = -math.inf,
                      accept: Callable[[float], bool] = lambda stamp: True) -> float | None:
        """The newest stamp of the first source after `after_s` that `accept` takes, complete or not: the
        observation `newest` would give if every other source had matched it."""
        stamps = [stamp for stamp, _ in self.buffers[next(iter(self.buffers))] if stamp > after_s and accept(stamp)]
        return max(stamps, default=None)

    def offsets(self, stamp_s: float) -> dict[str, float | None]:
        """Why an observation at `stamp_s` (a stamp of the first source) is complete or not: each other
        source's nearest stamp minus `stamp_s` (within +-skew_s: it matches; None: nothing from that source)."""
        _, *others = self.buffers
        nearest = {source: self._nearest(source, stamp_s) for source in others}
        return {source: None if best is None else best[0] - stamp_s for source, best in nearest.items()}

    def forget(self, when: Callable[[float], bool], source: str | None = None) -> int:
        """Forget the messages of `source` (every source: None) whose stamps `when` takes: frames refused as
        impossible, or the old time after a jump back. How many went."""
        gone = 0
        for name in [source] if source is not None else list(self.buffers):
            buffer = self.buffers[name]
            kept = [item for item in buffer if not when(item[0])]
            gone += len(buffer) - len(kept)
            buffer.clear()
            buffer.extend(kept)
        return gone

    def newest_stamp(self, source: str) -> float | None:
        """The newest stamp heard from `source` and still kept; None when none is."""
        return max((stamp for stamp, _ in self.buffers[source]), default=None)

    def _nearest(self, source: str, stamp_s: float) -> tuple[float, object] | None:
        return min(self.buffers[source], key=lambda item: abs(item[0] - stamp_s), default=None)


# --- the target as the policy reads it (observation.environment_state) ------------------------------------
TASK_PREFIX = "pick up the "


def requested_kind(task: str) -> str:
    """The kind a task text asks for ("pick up the cup" -> "cup"); "" when it is no pick task."""
    return task.removeprefix(TASK_PREFIX) if task.startswith(TASK_PREFIX) else ""


# environment_state's layouts, "target" (10), "target_tool" (13) and "target_tool_yaw" (15), are named in
# act_node.table_frame (ENV_LAYOUTS). target_tool's last three numbers come from the tool centre point in the table
# frame, which the caller gives: the env reads it from the simulator, the recorder and the policy node from the
# joints by the URDF's forward kinematics (act_node.description.tool_point); the two agree to 1e-6 m
# (tests/test_description.py). target_tool_yaw's last two are the yaw reader's (act_node.perception.yaw), read from the
# cameras once an episode; the caller gives them too.


def _finite(value, size: int) -> np.ndarray | None:
    """`value` as `size` finite float64 numbers, or None when it is missing, of another size or not finite."""
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    return array if array.shape == (size,) and np.all(np.isfinite(array)) else None


def environment_state(target_xy, request: str, tool_xyz=None, layout: str = "target", yaw=None):
    """environment_state for a target at `target_xy` (table frame, metres) of the requested kind, in `layout`
    ("target_tool" needs the tool centre point `tool_xyz`, table frame, metres; "target_tool_yaw" that and the
    requested object's `yaw` numbers, (cos k*yaw, sin k*yaw)): float32 (len(environment_state_names(layout)),).
    ValueError on an unknown kind or layout, a target that is not two finite numbers, or a tool point or yaw
    missing or not three (two) finite numbers."""
    if layout not in ENV_LAYOUTS:
        environment_state_names(layout)  # raises, naming the layouts
    xy = np.asarray(target_xy, dtype=np.float32).reshape(-1)
    if xy.shape != (2,) or not np.all(np.isfinite(xy)):
        raise ValueError(f"the target must be two finite numbers (x, y), got {target_xy!r}")
    if request not in KIND_NAMES:
        raise ValueError(f"unknown requested kind {request!r}; expected one of {list(KIND_NAMES)}")
    state = np.zeros(2 + len(KIND_NAMES), dtype=np.float32)
    state[:2] = xy
    state[2 + kind_index(request)] = 1.0
    if layout == "target":
        return state
    tcp = _finite(tool_xyz, 3)
    if tcp is None:
        raise ValueError(f"environment_state {layout!r} needs the tool centre point (x, y, z in metres, finite), "
                         f"got {tool_xyz!r}")
    state = np.r_[state, tcp[0] - xy[0], tcp[1] - xy[1], tcp[2]].astype(np.float32)
    if layout == "target_tool":
        return state
    turn = _finite(yaw, 2)
    if turn is None:
        raise ValueError(f"environment_state {layout!r} needs the requested object's yaw (cos k*yaw, sin k*yaw: two "
                         f"finite numbers, act_node.perception.yaw), got {yaw!r}")
    return np.r_[state, turn].astype(np.float32)


def build_observation(joints_rad, images: dict[str, np.ndarray], target_xy=None, request: str | None = None,
                      layout: str = "target", tool_xyz=None, yaw=None) -> dict:
    """The observation as the env gives it and LeRobot's `preprocess_observation` reads it:
    agent_pos (6,) float32 in LeRobot's SO-101 units (degrees, gripper 0-100) from the joints in radians,
    pixels {camera: (H, W, 3) uint8}, and, when a target is given, environment_state in `layout` for it, the
    requested kind (and, in layout target_tool, the tool centre point `tool_xyz` relative to it; in target_tool_yaw
    also the requested object's `yaw` numbers) (ValueError for an unknown kind or layout, a target that is not two
    finite numbers, a missing tool point or yaw)."""
    observation = {"agent_pos": so101.to_lerobot(np.asarray(joints_rad, dtype=np.float64)).astype(np.float32),
                   "pixels": dict(images)}
    if target_xy is not None:
        observation["environment_state"] = environment_state(target_xy, request, tool_xyz, layout, yaw)
    return observation


def dataset_frame(observation: dict, action, task: str) -> dict:
    """One LeRobotDataset frame (act_node.record's features) from an observation and the action taken on it."""
    from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

    frame = {OBS_STATE: observation["agent_pos"]}
    if "environment_state" in observation:
        frame[OBS_ENV_STATE] = observation["environment_state"]
    frame.update({f"{OBS_IMAGES}.{name}": image for name, image in observation["pixels"].items()})
    return {**frame, ACTION: np.asarray(action, dtype=np.float32), "task": task}
