"""A server of three replicas named by one ``dns+http://`` URL, as a Kubernetes headless Service lists its pods:
three simulators on 127.0.0.1-3 at one port, the name resolved by the test's own /etc/hosts (a mount namespace).
The router is as unbalanced as can be: every request goes to the first replica. The rows must sum running and
waiting over the replicas, keep the median replica's KV usage apart from the fullest's, and the diagnosis must say
"unbalanced router", not "batch limit" (which the first replica alone, 8 slots and a queue, would show)."""

import json
import sys

import pytest

from tests.support.namespaces import skip_unless_namespaces, with_hosts
from tests.support.procs import LOCUSTFILE, accepted, clean_env, read_csv, server

pytestmark = pytest.mark.slow  # an end-to-end run: deselected by -m 'not slow'

SLOTS = ("--preset", "slots")  # 8 slots, decode slower with each: a queue past 8 users (sim/presets.py)
NAME = "llm-fleet.test"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    skip_unless_namespaces()
    import subprocess

    out = tmp_path_factory.mktemp("fleet")
    with server(sys.executable, "-m", "locust_llm.sim", "--port", "0", *SLOTS) as first:
        port = first.rsplit(":", 1)[1].split("/")[0]
        sims = [("127.0.0.2", port), ("127.0.0.3", port)]
        with (
            server(sys.executable, "-m", "locust_llm.sim", "--host", sims[0][0], "--port", port, *SLOTS),
            server(sys.executable, "-m", "locust_llm.sim", "--host", sims[1][0], "--port", port, *SLOTS),
        ):
            hosts = out / "hosts"
            hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.{i} {NAME}\n" for i in (1, 2, 3)))
            cmd = [
                sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
                "--host", first, "--model", "sim-slots",
                "--steps", "4,16", "--step-duration", "6s", "--warmup", "2s", "--max-tokens", "32",
                "--min-step-requests", "5", "--server-metrics", f"dns+http://{NAME}:{port}/metrics",
                "--csv", str(out / "run"),
            ]  # fmt: skip
            proc = subprocess.run(
                with_hosts(hosts, cmd), cwd=out, capture_output=True, text=True, timeout=120, env=clean_env()
            )
    assert accepted(proc.returncode, proc.stdout), proc.stderr[-3000:]
    summary = json.loads((out / "run_llm_summary.json").read_text())
    return proc, summary, read_csv(out / "run_llm_steps.csv"), read_csv(out / "run_llm_server_metrics.csv"), port


def test_every_replica_the_name_lists_is_scraped_and_written_with_its_address(fleet):
    _, _, rows, samples, port = fleet
    assert {s["replica"] for s in samples} == {f"127.0.0.{i}:{port}" for i in (1, 2, 3)}
    assert all(row["server_replicas"] == "3" for row in rows), rows


def test_running_and_waiting_are_the_fleets_sums_and_kv_usage_the_fullest_and_the_median(fleet):
    """At 16 users on the first replica's 8 slots: 8 running and 8 waiting there, nothing on the other two."""
    _, _, rows, _, _ = fleet
    top = rows[-1]
    assert float(top["server_running_p50"]) == 8, top  # the slots: exact, whatever the machine
    assert 4 <= float(top["server_waiting_p50"]) <= 8, top  # 16 users less the 8 running, less those between requests
    assert float(top["server_kv_usage_median_p50"]) == 0 < float(top["server_kv_usage_p50"]), top
    assert float(top["server_busiest_share_p50"]) == 1.0, top


def test_a_queue_on_one_replica_of_three_is_an_unbalanced_router(fleet):
    _, summary, _, _, _ = fleet
    diagnosis = summary["diagnosis"]
    assert diagnosis["wall"] == "unbalanced_router", diagnosis
    assert "100% of the waiting on one of 3 replicas" in diagnosis["sentence"], diagnosis
