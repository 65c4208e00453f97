"""/diagnostics for every node: one diagnostic_msgs/DiagnosticStatus a second, named "<node>: <what>".

A node builds its `Diagnostics` with a `fill(report)` callback; once a second (a steady clock: it keeps
reporting when /clock stops or jumps) the callback puts its counts into a fresh `Report` (`add`), raises the
level with the reason (`warn`, `error`), and the status goes out on /diagnostics as a DiagnosticArray, so that
`ros2 topic echo /diagnostics` or rqt's monitor shows what is wrong without reading logs. `recent(key, total)`
gives how much a running total grew over the last few reports: "refused recently", "failed recently".
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType

from act_node.nodes.messages import RELIABLE, header

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
PERIOD_S = 1.0
RECENT_REPORTS = 5  # "recently": over the last five reports (five seconds)


def text(value) -> str:
    """A value as diagnostics show it: floats to 3 decimals, counts by reason as "reason n, ...", or "none"."""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"
    return str(value)


class Report:
    """What a node says in one status: key/values in the order added, a level, and the message of its worst
    reason (several reasons of that level are joined with '; ')."""

    def __init__(self) -> None:
        self.level, self.message = OK, ""
        self.values: dict[str, str] = {}

    def add(self, key: str, value) -> None:
        self.values[key] = text(value)

    def update(self, values: Mapping) -> None:
        for key, value in values.items():
            self.add(key, value)

    def warn(self, message: str) -> None:
        self._raise(WARN, message)

    def error(self, message: str) -> None:
        self._raise(ERROR, message)

    def _raise(self, level: int, message: str) -> None:
        if level > self.level:
            self.level, self.message = level, message
        elif level == self.level and message and message not in self.message.split("; "):
            self.message = f"{self.message}; {message}" if self.message else message


class Diagnostics:
    """A node's /diagnostics: `fill(report)` once every `period_s`; a fill that returns False sends nothing."""

    def __init__(self, node, what: str, fill: Callable[[Report], bool | None], hardware_id: str = "",
                 period_s: float = PERIOD_S, callback_group=None, ok_message: str = "ok"):
        self.node, self.name, self.fill = node, f"{node.get_name()}: {what}", fill
        self.hardware_id, self.ok_message = hardware_id, ok_message
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", RELIABLE)
        self.timer = node.create_timer(period_s, self.publish, callback_group=callback_group,
                                       clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._history: dict[str, deque[float]] = {}

    def recent(self, key: str, total: float, reports: int = RECENT_REPORTS) -> float:
        """How much `total` (a running count, under its `key`) grew over the last `reports` reports."""
        history = self._history.setdefault(key, deque(maxlen=reports))
        grown = total - history[0] if history else total
        history.append(total)
        return grown

    def status(self) -> DiagnosticStatus | None:
        report = Report()
        if self.fill(report) is False:
            return None
        return DiagnosticStatus(level=report.level, name=self.name, hardware_id=self.hardware_id,
                                message=report.message or self.ok_message,
                                values=[KeyValue(key=k, value=v) for k, v in report.values.items()])

    def publish(self) -> DiagnosticArray | None:
        status = self.status()
        if status is None:
            return None
        array = DiagnosticArray(header=header(time.time(), ""), status=[status])
        self.publisher.publish(array)
        return array
