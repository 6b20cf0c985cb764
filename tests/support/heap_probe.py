"""Run by tests/unit/test_plugin_heap.py in its own process (Locust monkey-patches on import): what the garbage
collector walks before, during and after a test, with locust-llm's listeners installed; prints one JSON line."""

from __future__ import annotations

import gc
import json

from locust.env import Environment
from locust.event import Events

from locust_llm import plugin


class Marker:
    """An instance is tracked by the garbage collector."""


def tracked(obj: object) -> bool:
    """Whether a collection would walk ``obj``: frozen objects are not among gc.get_objects()."""
    return any(o is obj for o in gc.get_objects())


def main() -> None:
    events = Events()
    plugin.install(events)
    environment = Environment(events=events)
    got: dict[str, object] = {}
    before = Marker()
    got["before"] = [tracked(before), gc.get_freeze_count() > 0]
    events.test_start.fire(environment=environment)
    during = Marker()
    got["during"] = [tracked(before), tracked(during), gc.get_freeze_count() > 0]
    events.test_stop.fire(environment=environment)
    got["after"] = [tracked(before), gc.get_freeze_count() > 0]
    events.test_start.fire(environment=environment)
    plugin._stop_locust_csv_writer = lambda: None  # no Locust main here: nothing to stop
    events.quit.fire(exit_code=0)  # a test that never stopped
    got["quit"] = [tracked(before), gc.get_freeze_count() > 0]
    handlers = events.test_start._handlers
    got["freeze_after_config"] = handlers.index(plugin._freeze_heap) > handlers.index(plugin._on_test_start)
    print(json.dumps(got))


if __name__ == "__main__":
    main()
