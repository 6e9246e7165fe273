"""core/collector.py: the program's and the pack's processes collect their youngest generation less often."""

import gc

from core import collector


def test_tune_raises_the_youngest_threshold_and_keeps_the_others():
    before = gc.get_threshold()
    try:
        collector.tune()
        assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, before[1], before[2])
        assert gc.get_freeze_count() > 0  # what was alive is no longer scanned
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
