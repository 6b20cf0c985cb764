"""Run by tests/unit/test_plugin_gc.py in its own process (Locust monkey-patches on import): what the garbage
collector walks before, during and after a test, with locust-llm's listeners installed; prints one JSON line."""

from __future__ import annotations

import gc
import json

from locust.env import Environment
from locust.event import Events

from locust_llm import plugin
from locust_llm.config import gc_settings


class Marker:
    """An instance is tracked by the garbage collector."""


def tracked(obj: object) -> bool:
    """Whether a collection would walk ``obj``: frozen objects are not among gc.get_objects()."""
    return any(o is obj for o in gc.get_objects())


def collections_while_keeping(n: int) -> int:
    """How many collections run while ``n`` new tracked objects are made and kept."""
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    kept = [Marker() for _ in range(n)]
    gc.callbacks.remove(count)
    del kept
    return len(runs)


def threshold_through_a_test(events: Events, environment: Environment, before: int) -> list[int]:
    """The first threshold before, during and after a test, with ``before`` set first."""
    gc.set_threshold(before, 10, 10)
    seen = [gc.get_threshold()[0]]
    events.test_start.fire(environment=environment)
    seen.append(gc.get_threshold()[0])
    events.test_stop.fire(environment=environment)
    seen.append(gc.get_threshold()[0])
    return seen


def main() -> None:
    events = Events()
    plugin.install(events)
    environment = Environment(events=events)
    got: dict[str, object] = {"test_threshold": gc_settings.STEADY_THRESHOLD, "threshold_before": gc.get_threshold()[0]}
    before = Marker()
    got["before"] = [tracked(before), gc.get_freeze_count() > 0]
    events.test_start.fire(environment=environment)
    during = Marker()
    got["during"] = [tracked(before), tracked(during), gc.get_freeze_count() > 0]
    got["threshold_during"] = gc.get_threshold()[0]
    got["collections_keeping_20000_during"] = collections_while_keeping(20_000)
    events.test_stop.fire(environment=environment)
    got["after"] = [tracked(before), gc.get_freeze_count() > 0]
    got["threshold_after"] = gc.get_threshold()[0]
    got["collections_keeping_20000_after"] = collections_while_keeping(20_000)
    events.test_start.fire(environment=environment)
    plugin._stop_locust_csv_writer = lambda: None  # no Locust main here: nothing to stop
    events.quit.fire(exit_code=0)  # a test that never stopped
    got["quit"] = [tracked(before), gc.get_freeze_count() > 0, gc.get_threshold()[0]]
    got["user_thresholds"] = {n: threshold_through_a_test(events, environment, n) for n in (0, 100, 200_000)}
    handlers = events.test_start._handlers
    got["freeze_after_config"] = handlers.index(plugin._freeze_heap) > handlers.index(plugin._on_test_start)
    print(json.dumps(got))


if __name__ == "__main__":
    main()
