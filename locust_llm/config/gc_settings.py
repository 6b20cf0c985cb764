"""The garbage collector in a process that keeps many streams in flight: the generator during a test, the simulator.

:func:`tune_gc` collects once, freezes the heap alive then (no collection walks it again) and collects the youngest
generation only after :data:`STEADY_THRESHOLD` net new objects, not 700, which at a few hundred streams stopped every
token read about once a second; :func:`restore_gc` undoes both.
"""

from __future__ import annotations

import gc

__all__ = ["STEADY_THRESHOLD", "restore_gc", "tune_gc"]

STEADY_THRESHOLD = 50_000
"""The first generation's threshold while tuned."""

_saved: tuple[int, ...] | None = None
"""The thresholds :func:`tune_gc` replaced, for :func:`restore_gc` to put back; None when it replaced none."""


def tune_gc() -> None:
    """Collect once, freeze what is alive, raise the first threshold (module docstring). Tuning twice freezes the
    newer heap too and keeps the first saved thresholds."""
    global _saved
    gc.collect()
    gc.freeze()
    threshold = gc.get_threshold()
    if _saved is None and 0 < threshold[0] < STEADY_THRESHOLD:
        _saved = threshold
        gc.set_threshold(STEADY_THRESHOLD, *threshold[1:])


def restore_gc() -> None:
    """Unfreeze (a cycle left among the frozen objects is freed by the next collections) and put back the thresholds
    :func:`tune_gc` replaced."""
    global _saved
    gc.unfreeze()
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None
