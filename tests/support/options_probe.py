"""A locustfile that also writes the options each process runs with (to $PROBE_DIR/options-<pid>.json)."""

import json
import os

from locust import events

import locust_llm
from locust_llm import ChatStreamUser, StepShape  # noqa: F401

locust_llm.install()


@events.test_start.add_listener
def _write_options(environment, **_kwargs):
    path = os.path.join(os.environ["PROBE_DIR"], f"options-{os.getpid()}.json")
    with open(path, "w") as handle:
        json.dump(vars(environment.parsed_options), handle, default=str)
