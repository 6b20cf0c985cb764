"""The garbage collector in a process that keeps many streams in flight: the generator during a test, the simulator.

:func:`settle` applies two rules until :func:`unsettle` (the simulator keeps them for its whole life):

1. **The heap alive now is frozen.** One collection, then ``gc.freeze()``: every object alive (modules, Locust's
   runner, the run's config, the server's routes) moves to the permanent generation, which no collection walks.
   Refcounting frees frozen objects as usual; only cycles among them wait for :func:`unsettle`. Before, one full
   collection of a generator's start-up heap stalled it for tens of milliseconds at 512 streams, during which no
   token is stamped (README "Generator cost").
2. **The youngest generation is collected after** :data:`STEADY_THRESHOLD` **more tracked objects were made than
   freed**, not CPython's 700, unless a higher threshold, or none (``0``), was set. That count is a net one. A
   stream's objects (its closures, its result, its timers) live as long as the stream, so they are freed, as old
   objects, about as fast as new streams make theirs; at 700 the count still got there about once a second at 512
   streams, and each collection then walked the objects of every stream begun since the last one: 10,000-25,000
   objects, 0.2-18 ms with no token read or written, about 1 % of the time (as much as a p99 measures). At 50,000
   a steady process is collected rarely, while one that keeps objects (or leaves them in cycles: its own code may)
   is collected after that many, so that memory held by cyclic garbage stays bounded.
"""

from __future__ import annotations

import gc

__all__ = ["STEADY_THRESHOLD", "settle", "unsettle"]

STEADY_THRESHOLD = 50_000
"""The first generation's threshold while settled (rule 2)."""

_saved: tuple[int, ...] | None = None
"""The thresholds :func:`settle` replaced, for :func:`unsettle` to put back; None when it replaced none."""


def settle() -> None:
    """Collect once, freeze what is alive, raise the first threshold (module docstring). Settling twice freezes the
    newer heap too and keeps the first saved thresholds."""
    global _saved
    gc.collect()
    gc.freeze()
    threshold = gc.get_threshold()
    if _saved is None and 0 < threshold[0] < STEADY_THRESHOLD:
        _saved = threshold
        gc.set_threshold(STEADY_THRESHOLD, *threshold[1:])


def unsettle() -> None:
    """Unfreeze (a cycle left among the frozen objects is freed by the next collections) and put back the thresholds
    :func:`settle` replaced."""
    global _saved
    gc.unfreeze()
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None
