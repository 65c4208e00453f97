"""The observation a policy reads, built in one place, and matching one across topics by header stamps.

`build_observation` makes the env's dict (LeRobot's gym convention: `agent_pos`, `environment_state`, `pixels`)
from the joints in radians, the images and the target: the env, the policy node and the recorders call it, so
what is recorded is what is served. `dataset_frame` turns that dict and an action into a LeRobotDataset frame.

Which frame of a camera a tick takes (`FrameBounds`): a tick stamped t (a joint state; a command, in a recording)
takes each camera's newest frame stamped in

    [t - skew_s - frame_max_age * the camera's period,  t + skew_s]

that is, not from the tick's future beyond skew_s (the clocks' jitter) and not older than a bound tied to that
camera's period (1 / its frames a second, as given: `camera_fps`): a camera at 15 fps may give a tick a frame twice
as old as one at 30 fps. It is LeRobot's rule (`OpenCVCamera.read_latest(max_age_ms)`, read by the SO follower's
get_observation each tick), with the age in periods of each camera instead of one time. The period is the one given,
not one measured from the frames: a camera that slows down (a webcam's auto exposure halving its rate in dim light)
is reported (its measured period, on /diagnostics), not accommodated.
Cameras on their own clocks (an arm's) are never in phase with the joint states: their frames are stamped when
captured, and the newest one is as good as it gets. `frame_max_age` 0 leaves only frames of the tick's own stamp
(within skew_s): the sim's, whose streams all carry the tick's stamp (lockstep and realtime), match exactly.

Each source (the joint states, every camera) keeps its recent messages; the newest observation is the
newest stamp of the first source that every other source has a frame for. Messages may arrive late, out of
order or not at all: a stamp some source lacks is skipped for an older complete one. `newest_anchor` and
`misses` say why the newest one is not complete (a camera's nearest frame seconds before or after it, or none
at all): the policy node refuses a stale or impossible observation with that reason. `FrameAges` counts what a
node matched: how old each camera's frames were and how often nothing matched.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from act_node import so101
from act_node.table_frame import (  # noqa: F401 (the layouts' names are read from here too)
    ENV_LAYOUTS,
    GRASP_NAMES,
    JOINT_LAYOUTS,
    KIND_NAMES,
    TOOL_NAMES,
    YAW_NAMES,
    environment_layout,
    environment_state_names,
    kind_index,
)

BUFFER = 60  # messages kept per source: two seconds at 30 Hz
PERIOD_GAPS = 15  # a camera's period is the median of the gaps between its last this many + 1 frames
# the default bound on a frame's age, in its camera's periods: a camera node publishes the newest frame it has
# captured on a timer of its own, so a tick may find the frame before the newest still on its way (one period),
# the newest one a timer period old (up to one more), and a frame lost now and then (one more)
FRAME_MAX_AGE = 3.0


class StampedFrames:
    """One source's recent (stamp, value) pairs in stamp order, whatever order they came in; past `keep`, the one
    that came first goes (not the oldest stamp: after a jump back, the new time's stamps are the oldest)."""

    def __init__(self, keep: int | None = BUFFER):
        self.keep = keep
        self.items: list[tuple[float, object, int]] = []  # (stamp, value, arrival number), by stamp
        self.arrivals: deque[tuple[float, int]] = deque()
        self.count = 0

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return ((stamp, value) for stamp, value, _ in self.items)

    def add(self, stamp_s: float, value) -> None:
        self.count += 1
        bisect.insort(self.items, (stamp_s, value, self.count), key=lambda item: item[0])
        self.arrivals.append((stamp_s, self.count))
        if self.keep is not None and len(self.items) > self.keep:
            self._remove(*self.arrivals.popleft())

    def _remove(self, stamp_s: float, number: int) -> None:
        at = bisect.bisect_left(self.items, stamp_s, key=lambda item: item[0])
        while at < len(self.items) and self.items[at][2] != number:
            at += 1
        if at < len(self.items):
            del self.items[at]

    def clear(self) -> None:
        self.items.clear()
        self.arrivals.clear()

    def keep_only(self, when: Callable[[float], bool]) -> int:
        """Keep the items whose stamps `when` takes; how many went."""
        kept = [item for item in self.items if when(item[0])]
        gone, self.items[:] = len(self.items) - len(kept), kept
        if gone:
            numbers = {item[2] for item in kept}
            self.arrivals = deque(arrival for arrival in self.arrivals if arrival[1] in numbers)
        return gone

    def newest_stamp(self) -> float | None:
        return self.items[-1][0] if self.items else None

    def newest_in(self, low_s: float, high_s: float) -> tuple[float, object] | None:
        """The newest (stamp, value) stamped in [low_s, high_s], or None."""
        at = bisect.bisect_right(self.items, high_s, key=lambda item: item[0])
        return self.items[at - 1][:2] if at and self.items[at - 1][0] >= low_s else None

    def nearest(self, stamp_s: float) -> tuple[float, object] | None:
        best = min(self.items, key=lambda item: abs(item[0] - stamp_s), default=None)
        return None if best is None else best[:2]

    def after(self, stamp_s: float) -> bool:
        """Whether an item stamped after `stamp_s` is here."""
        return bool(self.items) and self.items[-1][0] > stamp_s

    def period_s(self) -> float | None:
        """The source's period: the median gap between its last PERIOD_GAPS + 1 stamps (None before two)."""
        stamps = [item[0] for item in self.items[-PERIOD_GAPS - 1:]]
        gaps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
        return statistics.median(gaps) if gaps else None


@dataclass(frozen=True)
class FrameBounds:
    """Which frame of a camera a tick stamped t takes: its newest frame stamped in [t - skew_s - max_age * period,
    t + skew_s] (the module's docstring), `max_age` in the camera's periods (0: only frames of the tick's stamp)."""

    skew_s: float
    max_age: float = 0.0

    def __post_init__(self):
        if not (self.skew_s >= 0 and self.max_age >= 0):
            raise ValueError(f"skew_s and frame_max_age must be >= 0, got {self.skew_s} and {self.max_age}")

    def oldest_s(self, period_s: float) -> float:
        """How long before a tick a frame of a camera of this period may be stamped and still be the tick's, s."""
        return self.skew_s + self.max_age * period_s

    def pick(self, frames: StampedFrames, stamp_s: float, period_s: float) -> tuple[float, object] | None:
        """The (stamp, frame) a tick at `stamp_s` takes from `frames` (a camera of `period_s`), or None."""
        return frames.newest_in(stamp_s - self.oldest_s(period_s), stamp_s + self.skew_s)

    def settled(self, frames: StampedFrames, stamp_s: float, picked: tuple[float, object] | None) -> bool:
        """Whether no later message can change the pick: the camera has shown a frame after the tick's window
        (its frames come in order), or the pick has the tick's own stamp."""
        return frames.after(stamp_s + self.skew_s) or (picked is not None and abs(picked[0] - stamp_s) <= self.skew_s)


def camera_periods(cameras: list[str], periods: Mapping[str, float] | float) -> dict[str, float]:
    """{camera: period in seconds} from one period for all or one each; ValueError naming a missing or bad one."""
    given = dict.fromkeys(cameras, periods) if isinstance(periods, (int, float)) else dict(periods)
    bad = {camera: given.get(camera) for camera in cameras if not 0 < given.get(camera, 0) < math.inf}
    if bad:
        raise ValueError(f"every camera needs a period > 0 s (1 / its frames a second); got {bad}")
    return {camera: float(given[camera]) for camera in cameras}


def periods_of_rates(cameras: list[str], rates: list[float], fps: float, what: str = "camera_fps") -> dict[str, float]:
    """Each camera's period from `rates` (frames a second, one per camera in `cameras`' order; empty: `fps` for
    all). ValueError naming what is wrong."""
    if not rates:
        rates = [fps] * len(cameras)
    if len(rates) != len(cameras) or not all(0 < rate < math.inf for rate in rates):
        raise ValueError(f"{what} must give one rate > 0 (frames a second) per camera of {list(cameras)}, got "
                         f"{list(rates)}")
    return {camera: 1.0 / float(rate) for camera, rate in zip(cameras, rates)}


@dataclass
class FrameAge:
    """One camera's matches: ticks that took a frame and ticks that found none, and how old the frames taken were
    (seconds from the frame's stamp to the tick's; a frame up to skew_s after the tick is 0 old or less)."""

    matched: int = 0
    unmatched: int = 0
    last_s: float = 0.0
    total_s: float = 0.0
    max_s: float = 0.0

    def add(self, age_s: float | None) -> None:
        if age_s is None:
            self.unmatched += 1
            return
        self.matched += 1
        self.last_s, self.total_s, self.max_s = age_s, self.total_s + age_s, max(self.max_s, age_s)

    @property
    def mean_s(self) -> float:
        return self.total_s / self.matched if self.matched else 0.0


@dataclass
class FrameAges:
    """Every camera's FrameAge, and its period and bound as last measured: what /diagnostics shows of a matcher."""

    cameras: dict[str, FrameAge] = field(default_factory=dict)
    # camera -> (its period as given, as measured from its frames, the oldest a frame may be), seconds
    bounds: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    def add(self, camera: str, age_s: float | None) -> None:
        self.cameras.setdefault(camera, FrameAge()).add(age_s)

    def unmatched(self) -> int:
        return sum(age.unmatched for age in self.cameras.values())

    def slow(self) -> list[str]:
        """The cameras whose frames came at over 1.5 times their given period lately: '<camera> every N ms, not M'."""
        return [f"{camera} every {measured * 1e3:.0f} ms, not {period * 1e3:.0f}"
                for camera, (period, measured, _) in sorted(self.bounds.items()) if measured > 1.5 * period]

    def report(self, prefix: str = "") -> dict[str, str]:
        """{prefix + camera.key: text}: ticks matched and not, the frames' age (last, mean, max), the camera's
        period (as given and as measured) and the bound on the age, in ms."""
        values = {}
        for camera, age in sorted(self.cameras.items()):
            period, measured, oldest = self.bounds.get(camera, (math.nan, math.nan, math.nan))
            key = f"{prefix}{camera}"
            values.update({f"{key}.matched": str(age.matched), f"{key}.unmatched": str(age.unmatched)})
            values.update({f"{key}.{name}_ms": f"{seconds * 1e3:.1f}" for name, seconds in (
                ("age_last", age.last_s), ("age_mean", age.mean_s), ("age_max", age.max_s), ("period", period),
                ("measured_period", measured), ("oldest", oldest))})
        return values


class ObservationMatcher:
    """Recent (stamp, value) pairs per source; `newest()` finds the newest stamp of the first source (the joint
    states) that every other source (the cameras) has a frame for, by `FrameBounds`."""

    def __init__(self, sources: list[str], skew_s: float, buffer: int = BUFFER, max_age: float = 0.0,
                 periods: Mapping[str, float] | float = 1 / 30, count_after_s: float = 1.0):
        """`periods`: each other source's period in seconds (1 / its frames a second), or one for all.
        `ages` counts each stamp of the first source once no later frame can change its match (every other source
        has shown one after it), or once that source has moved `count_after_s` past it."""
        if not sources:
            raise ValueError("an observation needs at least one source")
        if skew_s < 0:
            raise ValueError(f"skew_s must be >= 0, got {skew_s}")
        self.skew_s = skew_s
        self.bounds = FrameBounds(skew_s, max_age)
        self.buffers: dict[str, StampedFrames] = {name: StampedFrames(buffer) for name in sources}
        self.periods = camera_periods(sources[1:], periods)
        self.ages = FrameAges()  # each stamp of the first source: how old each other source's frame was, or none
        self.count_after_s = count_after_s
        self._uncounted: deque[float] = deque()

    def add(self, source: str, stamp_s: float, value) -> None:
        if source not in self.buffers:
            raise KeyError(f"unknown source {source!r}; sources are {list(self.buffers)}")
        self.buffers[source].add(stamp_s, value)
        if source == next(iter(self.buffers)):
            self._uncounted.append(stamp_s)
        self._count()

    def _count(self) -> None:
        """Count the first source's stamps whose matches are settled into `ages`."""
        newest = self.buffers[next(iter(self.buffers))].newest_stamp()
        while self._uncounted:
            stamp = self._uncounted[0]
            match = self.match(stamp)
            settled = all(self.bounds.settled(self.buffers[source], stamp, part) for source, part in match.items())
            if not settled and newest - stamp < self.count_after_s:
                return
            self._uncounted.popleft()
            for source, part in match.items():
                self.ages.add(source, None if part is None else stamp - part[0])

    def clear(self) -> None:
        """Forget every message (the counts in `ages` stay)."""
        for buffer in self.buffers.values():
            buffer.clear()
        self._uncounted.clear()

    def match(self, stamp_s: float) -> dict[str, tuple[float, object] | None]:
        """Each other source's (stamp, value) for the first source's stamp `stamp_s`, or None where it has none."""
        return {source: self.bounds.pick(self.buffers[source], stamp_s, period)
                for source, period in self.periods.items()}

    def newest(self, after_s: float = -math.inf,
               accept: Callable[[float], bool] = lambda stamp: True) -> tuple[float, dict] | None:
        """(stamp, {source: value}) for the newest stamp of the first source that every other source has a frame
        for (FrameBounds); only stamps after `after_s` that `accept` takes. None when no such observation is
        complete."""
        anchor = next(iter(self.buffers))
        for stamp, value in reversed(list(self.buffers[anchor])):
            if stamp <= after_s:
                return None
            if not accept(stamp):
                continue
            match = self.match(stamp)
            if all(part is not None for part in match.values()):
                return stamp, {anchor: value, **{source: part[1] for source, part in match.items()}}
        return None

    def newest_anchor(self, after_s: float = -math.inf,
                      accept: Callable[[float], bool] = lambda stamp: True) -> float | None:
        """The newest stamp of the first source after `after_s` that `accept` takes, complete or not: the
        observation `newest` would give if every other source had matched it."""
        stamps = [stamp for stamp, _ in self.buffers[next(iter(self.buffers))] if stamp > after_s and accept(stamp)]
        return max(stamps, default=None)

    def misses(self, stamp_s: float) -> dict[str, float | None]:
        """Why an observation at `stamp_s` (a stamp of the first source) is not complete: for each other source
        that has no frame for it, its nearest frame's stamp minus `stamp_s` (after the tick's window: > skew_s;
        older than the bound: < -oldest_s(source); None: nothing from that source)."""
        return {source: None if (near := self.buffers[source].nearest(stamp_s)) is None else near[0] - stamp_s
                for source, part in self.match(stamp_s).items() if part is None}

    def oldest_s(self, source: str) -> float:
        """How long before a tick a frame of `source` may be stamped and be matched to it, seconds."""
        return self.bounds.oldest_s(self.periods[source])

    def measured_period_s(self, source: str) -> float | None:
        """The period `source`'s frames came at lately (the median gap of its last stamps), None before two."""
        return self.buffers[source].period_s()

    def forget(self, when: Callable[[float], bool], source: str | None = None) -> int:
        """Forget the messages of `source` (every source: None) whose stamps `when` takes: frames refused as
        impossible, or the old time after a jump back. How many went."""
        if source is None or source == next(iter(self.buffers)):
            self._uncounted = deque(stamp for stamp in self._uncounted if not when(stamp))
        return sum(self.buffers[name].keep_only(lambda at: not when(at))
                   for name in ([source] if source is not None else list(self.buffers)))

    def newest_stamp(self, source: str) -> float | None:
        """The newest stamp heard from `source` and still kept; None when none is."""
        return self.buffers[source].newest_stamp()


# --- the target as the policy reads it (observation.environment_state) ------------------------------------
TASK_PREFIX = "pick up the "


def requested_kind(task: str) -> str:
    """The kind a task text asks for ("pick up the cup" -> "cup"); "" when it is no pick task."""
    return task.removeprefix(TASK_PREFIX) if task.startswith(TASK_PREFIX) else ""


# environment_state's layouts, "target" (10), "target_tool" (13), "target_tool_yaw" (15) and "target_tool_yaw_grasp"
# (19), are named in act_node.table_frame (ENV_LAYOUTS). target_tool's last three numbers come from the tool centre
# point in the table frame, which the caller gives: the env reads it from the simulator, the recorder and the policy
# node from the joints by the URDF's forward kinematics (act_node.description.tool_point); the two agree to 1e-6 m
# (tests/test_description.py). target_tool_yaw's last two are the yaw reader's (act_node.perception.yaw), read from the
# cameras once an episode; the caller gives them too. target_tool_yaw_grasp's last four are the planner's grasp
# (act_node.grasp), planned once an episode; the caller gives them too.


def _finite(value, size: int) -> np.ndarray | None:
    """`value` as `size` finite float64 numbers, or None when it is missing, of another size or not finite."""
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    return array if array.shape == (size,) and np.all(np.isfinite(array)) else None


def environment_state(target_xy, request: str, tool_xyz=None, layout: str = "target", yaw=None, grasp=None):
    """environment_state for a target at `target_xy` (table frame, metres) of the requested kind, in `layout`
    ("target_tool" needs the tool centre point `tool_xyz`, table frame, metres; "target_tool_yaw" that and the
    requested object's `yaw` numbers, (cos k*yaw, sin k*yaw); "target_tool_yaw_grasp" those and the planned
    `grasp`'s four numbers, act_node.grasp): float32 (len(environment_state_names(layout)),).
    ValueError on an unknown kind or layout, a target that is not two finite numbers, or a tool point, yaw or grasp
    missing or not three (two, four) finite numbers."""
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
    state = np.r_[state, turn].astype(np.float32)
    if layout == "target_tool_yaw":
        return state
    chosen = _finite(grasp, len(GRASP_NAMES))
    if chosen is None:
        raise ValueError(f"environment_state {layout!r} needs the planned grasp ({', '.join(GRASP_NAMES)}: four "
                         f"finite numbers, act_node.grasp), got {grasp!r}")
    return np.r_[state, chosen].astype(np.float32)


def build_observation(joints_rad, images: dict[str, np.ndarray], target_xy=None, request: str | None = None,
                      layout: str = "target", tool_xyz=None, yaw=None, grasp=None) -> dict:
    """The observation as the env gives it and LeRobot's `preprocess_observation` reads it:
    agent_pos (6,) float32 in LeRobot's SO-101 units (degrees, gripper 0-100) from the joints in radians,
    pixels {camera: (H, W, 3) uint8}, and, when a target is given, environment_state in `layout` for it, the
    requested kind (and, in layout target_tool, the tool centre point `tool_xyz` relative to it; in target_tool_yaw
    also the requested object's `yaw` numbers; in target_tool_yaw_grasp also the planned `grasp`) (ValueError for an
    unknown kind or layout, a target that is not two finite numbers, a missing tool point, yaw or grasp)."""
    observation = {"agent_pos": so101.to_lerobot(np.asarray(joints_rad, dtype=np.float64)).astype(np.float32),
                   "pixels": dict(images)}
    if target_xy is not None:
        observation["environment_state"] = environment_state(target_xy, request, tool_xyz, layout, yaw, grasp)
    return observation


def dataset_frame(observation: dict, action, task: str) -> dict:
    """One LeRobotDataset frame (act_node.record's features) from an observation and the action taken on it."""
    from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

    frame = {OBS_STATE: observation["agent_pos"]}
    if "environment_state" in observation:
        frame[OBS_ENV_STATE] = observation["environment_state"]
    frame.update({f"{OBS_IMAGES}.{name}": image for name, image in observation["pixels"].items()})
    return {**frame, ACTION: np.asarray(action, dtype=np.float32), "task": task}
