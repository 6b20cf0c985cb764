import subprocess
import sys

from tests.support.procs import default_sigint

SCRIPT = """
import os, signal, gevent
from locust_llm.runtime.interrupt import route_sigint_to_main
if sys.argv[1] == "route":
    assert route_sigint_to_main()
def busy():
    os.kill(os.getpid(), signal.SIGINT)  # arrives while this greenlet, not the main one, runs Python code
    total = sum(range(2_000_000))
    print("the busy greenlet ran on", flush=True)
worker = gevent.spawn(busy)
try:
    worker.join()  # the main greenlet waits, as Locust's does
    gevent.sleep(0.5)
    print("main greenlet: no interrupt", flush=True)
except KeyboardInterrupt:
    print("main greenlet: KeyboardInterrupt", flush=True)
"""


def run(mode):
    code = "import sys\n" + SCRIPT
    return subprocess.run(
        [sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=60, preexec_fn=default_sigint
    ).stdout


def test_sigint_reaches_the_main_greenlet_whichever_greenlet_runs():
    out = run("route")
    assert "the busy greenlet ran on" in out and "main greenlet: KeyboardInterrupt" in out


def test_without_it_the_greenlet_that_happened_to_run_is_killed_halfway():
    out = run("default")  # what the handler prevents: the shape's greenlet killed in the middle of a step change
    assert "the busy greenlet ran on" not in out
