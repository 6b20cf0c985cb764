"""bench/master.py's recording: the project's user and shape, and on the master each worker report appended to
$LOCUST_LLM_BENCH_RECORD as it arrived (msgpack, one after another): the worker's id, the report (Locust's
statistics and locust-llm's part) and the master's CPU time (its thread's) for merging locust-llm's part."""

import os
import time

import msgpack

import locust_llm
from locust_llm import ChatStreamUser, StepShape  # noqa: F401  (Locust picks up the user and the shape)
from locust_llm.runtime.collector import Collector

locust_llm.install()

_merge = Collector._on_worker_report
_out = []


def _recorded(self, client_id, data, **kw):
    t0 = time.thread_time()
    _merge(self, client_id, data, **kw)
    cpu_s = time.thread_time() - t0
    if not _out:
        _out.append(open(os.environ["LOCUST_LLM_BENCH_RECORD"], "ab"))  # noqa: SIM115  (open for the whole run)
    _out[0].write(msgpack.packb({"client": client_id, "cpu_s": cpu_s, "data": data}, default=str))
    _out[0].flush()


Collector._on_worker_report = _recorded  # the master's listener, registered when the run starts
