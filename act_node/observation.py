"""Matching an observation across topics by header stamps, never by arrival order.

Each source (the joint states, every camera) keeps its recent messages; the newest observation is the
newest stamp of the first source that every other source matches within `skew_s`. Messages may arrive
late, out of order or not at all: a stamp some source lacks is skipped for an older complete one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

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
                best = min(self.buffers[source], key=lambda item: abs(item[0] - stamp), default=None)
                if best is None or abs(best[0] - stamp) > self.skew_s:
                    break
                match[source] = best[1]
            else:
                return stamp, match
        return None
