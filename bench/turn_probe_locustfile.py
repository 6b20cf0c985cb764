"""The project's users, with a probe on the pump's turn stamp, for bench/turn_lag.py (not for load tests).

Each pumped read is stamped with the start of its turn of the event loop where the kernel gives no receive time
(``locust_llm.http.pump``; the probe asks for none, so every pumped read takes that rule), and so is each HTTPS read
whose greenlet waited for its socket (``locust_llm.http.stream._read_rest``); this probe notes, whenever such a stamp is
taken, how long after that start it is taken: what the stamp would have been late by had it been taken then. Stamps in
the first ``TURN_PROBE_SKIP_S`` seconds (start-up and warm-up) are left out. At the end of the test it writes the sorted
delays (ns) as JSON to ``TURN_PROBE_OUT``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locust import events

import locust_llm.http.loop as loop_module
import locust_llm.http.pump as pump_module
import locust_llm.http.stream as stream_module
from locustfile import *  # noqa: F403  the project's user classes

_turn = loop_module.loop_turn
_delays: list[int] = []
_from_ns = time.perf_counter_ns() + int(float(os.environ.get("TURN_PROBE_SKIP_S", "10")) * 1e9)


class _Probe:
    """Stands for the loop's turn: reading its start (a stamp) notes how long after it the read runs."""

    __slots__ = ("turn",)

    def __init__(self, turn: Any) -> None:
        self.turn = turn

    @property
    def start_ns(self) -> int:
        value: int = self.turn.start_ns
        now = time.perf_counter_ns()
        if now > _from_ns:
            _delays.append(now - value)
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self.turn, name)


def _probed_turn(clock: Any) -> Any:
    turn = _turn(clock)
    return None if turn is None else _Probe(turn)


pump_module.loop_turn = _probed_turn
pump_module.kernel_stamps = lambda raw: False  # the turn's rule, which kernel receive times otherwise replace
stream_module.loop_turn = _probed_turn


@events.quitting.add_listener
def _write(**_kwargs: Any) -> None:
    Path(os.environ["TURN_PROBE_OUT"]).write_text(json.dumps(sorted(_delays)))
