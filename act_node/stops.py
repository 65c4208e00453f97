"""Stopping long work cleanly on Ctrl-C or SIGTERM: the signals that mean "stop", and a handler that only asks.

A recording, an evaluation or a node that is killed in the middle of a write loses what it was writing; these
let the work stop at its next safe point instead (act_node.record, act_node.episodes, act_node.nodes.runner).
"""

from __future__ import annotations

import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
