"""SIGINT and SIGTERM noted for a loop to read, without a lock. Standard library only.

A handler that takes a lock can deadlock its own process: Python runs a handler between two bytecodes of the main
thread, so a second signal can interrupt the first one's handler while it holds the lock, and the second handler then
waits for it forever. `threading.Event.set` takes its Condition's lock: `make serve`'s Ctrl-C (SIGINT to the site,
then SIGTERM from scripts/serve's trap a moment later) once left the site waiting so, and the script with it.
"""

from __future__ import annotations

import signal
from types import FrameType


class StopSignals:
    """Installs its handler for `signums`; true once one of them arrived. The handler only appends to a list."""

    def __init__(self, *signums: signal.Signals) -> None:
        self.received: list[int] = []
        for signum in signums:
            signal.signal(signum, self._note)

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)

    def is_set(self) -> bool:
        """Whether a stop signal arrived (named as threading.Event's, which a loop may be given instead)."""
        return bool(self.received)
