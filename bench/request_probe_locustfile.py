"""The project's users, with a probe on where a request's time goes in its user's greenlet (not for load tests).

A greenlet switch hook charges the time between two switches to the greenlet that ran; each probed function adds up
the time its own greenlet ran between its call and its return, so a wait inside it (for the response head, for the
body, Locust's pause between tasks) counts nothing. Calls that return in the first ``REQUEST_PROBE_SKIP_S`` seconds
(start-up and warm-up) are left out. At the end of the test it appends, to ``REQUEST_PROBE_OUT``, one line per
function: its µs per request (divided by the task's calls) and its calls per request. The hook adds a little to
every figure (each probed call about 1-2 µs, so the finer split below adds some tens of µs per request). With
``REQUEST_PROBE_FINE=1`` it also times the pieces inside those steps: the pool's ``get_socket`` and
``return_socket``, the attempt's set-up, the pump's waits, the collector and the workload. For example, against a
pacing simulator on another core::

    REQUEST_PROBE_OUT=/tmp/probe.txt taskset -c 1 python -m locust -f bench/request_probe_locustfile.py --headless \\
        --host http://127.0.0.1:PORT/v1 --model sim-llm --steps 256 --step-duration 30s --warmup 5s \\
        --max-tokens 64 --csv /tmp/probe --only-summary
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import greenlet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locust import events

import locust_llm.http.attempt as attempt_module
import locust_llm.http.head as head_module
import locust_llm.http.loop as loop_module
import locust_llm.http.post as wire_module
import locust_llm.http.pump as pump_module
import locust_llm.http.stream as stream_module
import locust_llm.runtime.collector as collector_module
import locust_llm.runtime.recorder as recorder_module
import locust_llm.users.flow as flow_module
from locustfile import *  # noqa: F403  the project's user classes
from locustfile import ChatStreamUser

_clock = time.perf_counter_ns
_ran: defaultdict[Any, int] = defaultdict(int)  # greenlet -> ns it ran, up to its last switch
_last = [_clock()]
_totals: defaultdict[str, int] = defaultdict(int)
_calls: defaultdict[str, int] = defaultdict(int)
_from_ns = _clock() + int(float(os.environ.get("REQUEST_PROBE_SKIP_S", "12")) * 1e9)
TASK = "task (chat_once)"


def _switched(event: str, args: tuple[Any, Any]) -> None:
    if event in ("switch", "throw"):
        now = _clock()
        _ran[args[0]] += now - _last[0]
        _last[0] = now


greenlet.settrace(_switched)


def _running() -> int:
    """How long the current greenlet has run, up to now."""
    return _ran[greenlet.getcurrent()] + _clock() - _last[0]


def _probed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def probed(*args: Any, **kwargs: Any) -> Any:
        start = _running()
        try:
            return function(*args, **kwargs)
        finally:
            if _clock() > _from_ns:
                _totals[label] += _running() - start
                _calls[label] += 1

    return probed


def _probe(owner: Any, name: str, label: str, *also: Any) -> None:
    """Replace ``owner.name`` with its probed version, there and in every module of ``also`` that imported it."""
    probed = _probed(label, getattr(owner, name))
    for holder in (owner, *also):
        setattr(holder, name, probed)


ChatStreamUser.tasks[0] = _probed(TASK, ChatStreamUser.tasks[0])  # Locust calls the task from this list
_probe(sys.modules["locust.user.task"].TaskSet, "wait", "Locust's wait between tasks")
_probe(flow_module.Flow, "request", "Flow.request")
_probe(ChatStreamUser, "send", "ChatStreamUser.send")
_probe(attempt_module.Attempt, "__exit__", "Attempt.__exit__")
_probe(wire_module, "post", "wire.post", stream_module)
_probe(wire_module, "_send", "wire._send")
_probe(wire_module, "_read_head", "wire._read_head")
_probe(head_module, "plain_head", "head.plain_head", wire_module)
_probe(stream_module, "_read_events", "stream._read_events")
_probe(pump_module, "pump", "pump.pump", stream_module)
_probe(flow_module.Flow, "_record_attempt", "Flow._record_attempt")
_probe(recorder_module.Recorder, "record", "Recorder.record")
_probe(recorder_module.Recorder, "flush", "Recorder.flush (Locust's rows)")
_probe(recorder_module.Recorder, "record_client", "Recorder.record_client")
_probe(collector_module.Collector, "_file_pending", "Collector._file_pending (per-step histograms)")
if os.environ.get("REQUEST_PROBE_FINE") == "1":  # the pieces inside the steps above (module docstring)
    import geventhttpclient.connectionpool as pool_module

    import locust_llm.http.chunked as chunked_module
    import locust_llm.measure.failfast as failfast_module
    import locust_llm.users.chat as chat_module
    import locust_llm.workload.prompts as prompts_module

    _probe(prompts_module.Workload, "body", "Workload.body")
    _probe(prompts_module.Workload, "messages", "Workload.messages")
    _probe(stream_module, "run_stream", "stream.run_stream", chat_module)
    _probe(pool_module.ConnectionPool, "get_socket", "pool.get_socket")
    _probe(pool_module.ConnectionPool, "return_socket", "pool.return_socket")
    _probe(head_module.StreamResponse, "__init__", "StreamResponse.__init__")
    _probe(attempt_module.Attempt, "__init__", "Attempt.__init__")
    _probe(attempt_module.Attempt, "__enter__", "Attempt.__enter__")
    _probe(attempt_module.Attempt, "check_not_empty", "Attempt.check_not_empty")
    _probe(collector_module.Collector, "record", "Collector.record")
    _probe(failfast_module.FailFast, "feed", "FailFast.feed")
    _probe(flow_module.Flow, "_route", "Flow._route")
    _probe(flow_module.Flow, "_wait_turn", "Flow._wait_turn")
    _probe(loop_module, "loop_turn", "loop.loop_turn", pump_module, wire_module, stream_module)
    _probe(pump_module, "_sleep", "pump._sleep")
    _probe(pump_module, "wait_readable", "pump.wait_readable", wire_module)
    _probe(chunked_module.Unchunker, "__init__", "Unchunker.__init__")
    _probe(wire_module, "_head", "wire._head")
    _probe(stream_module, "_read_rest", "stream._read_rest")


@events.quitting.add_listener
def _write(**_kwargs: Any) -> None:
    requests = _calls[TASK] or 1
    lines = [f"== {requests} requests"]
    for label in sorted(_totals, key=lambda name: -_totals[name]):
        per = _totals[label] / requests / 1000
        lines.append(f"{label:48s} {per:8.1f} us per request  ({_calls[label] / requests:.2f} calls per request)")
    with open(os.environ["REQUEST_PROBE_OUT"], "a") as out:
        out.write("\n".join(lines) + "\n")
