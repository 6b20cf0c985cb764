"""A distributed run as a cluster runs it: the master, two workers and the servers each in a network namespace of
its own (10.231.0.1-4 on one bridge), none on 127.0.0.1. Three routes: the simulator; a server whose preflight is
told ``Retry-After: 2`` (every worker's users hold their first request there); and one refused, dropped by
``--routes-allow-down`` (no worker sends to it). The run completes with exact rows, the master scrapes the server's
metrics across the network, the workers send the key from their own environment, and the key never crosses the
master-worker link: the master's side of that link is captured (tests/support/sniff.py) and searched.
"""

import json
import subprocess
import sys

import pytest

from locust_llm.sim.server import key_fingerprint
from tests.support.namespaces import hosts, inside, skip_unless_netns
from tests.support.procs import LOCUSTFILE, PREFLIGHT_REQUESTS, accepted, clean_env, read_csv, server

pytestmark = pytest.mark.slow  # an end-to-end run: deselected by -m 'not slow'

KEY = "sk-netns-test-0123456789abcdef"
PORT = "5557"


def read_json(namespace, base, path):
    """A server's JSON at ``path`` (the simulator's /sim/stats, the bad server's /seen), read from inside its
    namespace (the test's own cannot reach it)."""
    url = base.rsplit("/v1", 1)[0] + path
    read = f"import urllib.request; print(urllib.request.urlopen({url!r}).read().decode())"
    out = subprocess.run(inside(namespace, [sys.executable, "-c", read]), capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)


SWEEP = ("--routes", "routes.toml", "--routes-allow-down", "--steps", "2,4", "--step-duration", "6s", "--warmup",
         "2s", "--max-tokens", "16", "--stop-timeout", "20")  # fmt: skip
SIM = ("--port", "0", "--ttft-ms", "100", "--itl-ms", "10", "--capacity", "256")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    skip_unless_netns()
    out = tmp_path_factory.mktemp("netns")
    env = clean_env(OPENAI_API_KEY=KEY)
    locust = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    with hosts("master", "w1", "w2", "sim") as h:
        (master_ns, master_ip), (sim_ns, sim_ip) = h["master"], h["sim"]
        capture = out / "master-link.bin"
        sniff = inside(master_ns, [sys.executable, "-m", "tests.support.sniff", "v1", PORT, str(capture)])
        sim_cmd = inside(sim_ns, [sys.executable, "-m", "locust_llm.sim", "--host", sim_ip, *SIM])
        held_cmd = inside(sim_ns, [sys.executable, "-m", "tests.support.bad_server", "retry-after-first:2", sim_ip])
        with server(*sim_cmd) as base, server(*held_cmd) as held, server(*sniff, ready="(capturing)"):
            refused = f"http://{sim_ip}:9/v1"  # nothing listens there
            (out / "routes.toml").write_text(
                route("sim", base, "sim-llm") + route("held", held, "held-llm") + route("gone", refused, "m")
                + "[policy]\nprimary = { sim = 1, held = 1 }\n"
            )  # fmt: skip
            metrics = base.rsplit("/v1", 1)[0] + "/metrics"
            bind = ["--master-bind-host", master_ip, "--master-bind-port", PORT, "--expect-workers", "2"]
            master_cmd = [*locust, "--master", "--headless", *bind, *SWEEP, "--server-metrics", metrics, "--csv", "run"]
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            master = subprocess.Popen(inside(master_ns, master_cmd), cwd=out, env=env, **pipes)
            worker_cmd = [*locust, "--worker", "--master-host", master_ip, "--master-port", PORT]
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            workers = [subprocess.Popen(inside(h[w][0], worker_cmd), cwd=out, env=env, **quiet) for w in ("w1", "w2")]
            try:
                stdout, stderr = master.communicate(timeout=150)
            finally:
                for proc in (master, *workers):
                    if proc.poll() is None:
                        proc.kill()
                    proc.wait()
            stats = read_json(sim_ns, base, "/sim/stats")
            seen = read_json(sim_ns, held, "/seen")
    return master.returncode, stdout, stderr, out, stats, capture.read_bytes(), seen


def route(name, url, model):
    return f'[[route]]\nname = "{name}"\nbase_url = "{url}"\nmodel = "{model}"\napi_key_env = "OPENAI_API_KEY"\n\n'


def test_the_run_completes_across_hosts_with_exact_rows(run):
    code, stdout, stderr, out, stats, _, seen = run
    assert accepted(code, stdout), stderr[-3000:]
    rows = read_csv(out / "run_llm_steps.csv")
    assert {r["route"] for r in rows} == {"sim", "held"}, rows  # "gone" was dropped before any load
    assert all(r["workers"] == "2" and int(r["ok"]) > 0 for r in rows), rows
    workers = read_csv(out / "run_llm_workers.csv")
    assert len({w["worker"] for w in workers}) == 2
    by_route = {m: sum(int(w["requests"]) for w in workers if w["model"] == m) for m in ("sim", "held")}  # route
    assert by_route["sim"] == stats["models"]["sim-llm"]["finished"] - PREFLIGHT_REQUESTS > 0, by_route
    assert by_route["held"] == seen["requests"] - 1 > 0, by_route  # its preflight was refused: one request


def test_a_dropped_route_is_dropped_on_every_worker_and_a_preflight_hold_holds_them_all(run):
    """Both workers learn the drop and the hold from the master across the network: nothing goes to the refused
    route, and no user's request reaches the held server before the 2 s its preflight was told (the server's own
    clock: the hold starts when the answer arrived, later still)."""
    _, _, stderr, out, _, _, seen = run
    assert "route 'gone' dropped (--routes-allow-down)" in stderr
    workers = read_csv(out / "run_llm_workers.csv")
    for worker in {w["worker"] for w in workers}:  # each worker's users sent to both live routes (model: the route)
        assert {w["model"] for w in workers if w["worker"] == worker and int(w["requests"])} == {"sim", "held"}
    times = seen["times"]
    assert min(times[1:]) - times[0] >= 2.0, [round(t - times[0], 3) for t in times[:6]]


def test_only_the_master_scrapes_the_servers_metrics_across_the_network(run):
    _, _, _, out, stats, _, _ = run
    rows = [r for r in read_csv(out / "run_llm_steps.csv") if r["route"] == "sim"]
    assert rows and all(int(r["server_scrapes"]) >= 1 for r in rows) and stats["metrics_scrapes"] >= 3, rows


def test_the_workers_send_their_own_key_and_it_never_crosses_the_master_worker_link(run):
    _, _, _, _, stats, captured, seen = run
    assert stats["requests_by_key"] == {key_fingerprint(KEY): stats["models"]["sim-llm"]["finished"]}
    assert set(seen["auth"]) == {f"Bearer {KEY}"}
    assert b"locust_llm_step" in captured  # the capture holds the link's traffic: the master's step messages
    assert KEY.encode() not in captured and KEY[-16:].encode() not in captured
