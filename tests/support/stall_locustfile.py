"""The default locustfile, plus a greenlet that blocks this process's event loop on purpose: for ``STALL_MS`` (the
unpatched ``time.sleep``, which holds the whole hub) every ``STALL_EVERY_S`` while the run is in step ``STALL_STEP``.
What a slow scrape, a long GC pause or a starved CPU does to a generator, in the one step a test names."""

import os

import gevent
from gevent.monkey import get_original
from locust import events

import locust_llm
from locust_llm import ChatStreamUser, StepShape  # noqa: F401  (Locust picks up the user and the shape)
from locust_llm.plugin import llm_run

locust_llm.install()

STALL_STEP = int(os.environ.get("STALL_STEP", "0"))
STALL_MS = float(os.environ.get("STALL_MS", "300"))
STALL_EVERY_S = float(os.environ.get("STALL_EVERY_S", "1"))
blocking_sleep = get_original("time", "sleep")  # Locust patches time.sleep into a greenlet's sleep


@events.init.add_listener
def _block_the_loop(environment, **_kw):
    def block():
        while True:
            gevent.sleep(STALL_EVERY_S)
            mark = llm_run(environment).collector.timeline.current
            if mark is not None and mark.step == STALL_STEP:
                blocking_sleep(STALL_MS / 1000)  # blocks the hub: no greenlet, no read callback runs meanwhile

    if STALL_STEP:
        gevent.spawn(block)
