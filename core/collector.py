"""Python's cyclic garbage collector for the project's processes that build many objects and keep most of them until
they end: the Pulumi program (every resource's inputs and the outputs the engine sends back) and the policy pack
(every resource's properties and manifest, remembered). By default the youngest generation is collected every 700
allocations, and nearly everything it scans is still in use; at 256 pools that was 0.5-1 s of a preview's 11 s on
2 vCPU (docs/performance.md, issue 41)."""

from __future__ import annotations

import gc

# Allocations (net of frees) between two collections of the youngest generation; the older two keep their defaults.
YOUNG_THRESHOLD = 100_000


def tune() -> None:
    """Collect the youngest generation every YOUNG_THRESHOLD allocations, and never scan again what is already alive
    (the modules imported so far: `gc.freeze`)."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
