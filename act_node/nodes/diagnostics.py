"""/diagnostics for every node: one diagnostic_msgs/DiagnosticStatus a second, named "<node>: <what>".

A node builds its `Diagnostics` with a `fill(report)` callback; once a second (a steady clock: it keeps
reporting when /clock stops or jumps) the callback puts its counts into a fresh `Report` (`add`), raises the
level with the reason (`warn`, `error`), and the status goes out on /diagnostics as a DiagnosticArray, so that
`ros2 topic echo /diagnostics` or rqt's monitor shows what is wrong without reading logs. `recent(key, total)`
gives how much a running total grew over the last few reports: "refused recently", "failed recently".
`final()`, as the node stops, sends one last report with the figures at the end (a monitor, or a bench counting
chunks sent against received, sees the totals, not those of up to a second before) and waits, briefly, for
reliable subscribers to acknowledge it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration

from act_node.nodes.messages import RELIABLE, header

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
PERIOD_S = 1.0
RECENT_REPORTS = 5  # "recently": over the last five reports (five seconds)
FINAL_ACK_S = 0.5  # how long a stopping node waits for its last report to be acknowledged


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
        self.closed = False

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

    def final(self) -> DiagnosticArray | None:
        """The last report, as the node stops: no more from the timer after it. Call it once the node's own
        work has ended (its threads joined) and before its entities go. A context already shut down (a
        second Ctrl-C) sends nothing; the node stops anyway."""
        if self.closed:
            return None
        self.closed = True
        self.node.destroy_timer(self.timer)
        try:
            array = self.publish()
            if array is not None:
                self.publisher.wait_for_all_acked(Duration(seconds=FINAL_ACK_S))
            return array
        except Exception as error:  # noqa: BLE001 (the node is going anyway: say why there is no last report)
            self.node.get_logger().debug(f"no last diagnostics report: {error!r}")
            return None
