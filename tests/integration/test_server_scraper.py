"""The scraper against servers whose /metrics is good, absent, a web page, garbage, slow, dripping, huge or flapping,
and over several replicas: what answers is filed on the timeline and appended to the CSV, the rest is counted as a
failed scrape within its deadline and nothing else happens."""

import csv
import json
import socket
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest

from locust_llm.runtime import metrics_fetch
from locust_llm.runtime.collector import Collector
from locust_llm.runtime.metrics_fetch import MAX_BYTES, fetch_round, replicas
from locust_llm.runtime.server_scraper import CSV_COLUMNS, ServerScraper, metrics_urls
from tests.support.procs import server

TIMEOUT_S = 0.5
DRIP_S = 1.0
"""The hostile endpoint's drip: one byte a second. A reader that waited for even one byte past its deadline takes
this much longer; so each bound below is the deadline plus this, never more."""


def scraper(csv_path=None):
    runner = SimpleNamespace(send_message=lambda *a, **k: None, clients=SimpleNamespace(all=[]))
    collector = Collector(SimpleNamespace(runner=runner, events=None), "local")
    collector.begin_step(1, 4, warmup_ns=0)
    s = ServerScraper(collector, lambda: "m", lambda: None)
    s.start((), 1.0, auto=False, csv_path=csv_path)
    return s, collector


def scrapes_seen(url):
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
        return json.load(resp)


@pytest.fixture(scope="module")
def hostile():
    with server(sys.executable, "-m", "tests.support.hostile_metrics") as url:
        yield url


def test_auto_is_the_hosts_origin():
    assert metrics_urls(("auto",), "https://gw.example.com:8443/v1") == ("https://gw.example.com:8443/metrics",)
    assert metrics_urls((), "http://h/v1") == () and metrics_urls(("http://a/m",), None) == ("http://a/m",)


def test_good_metrics_are_filed_on_the_timeline_and_their_samples_written_as_they_come(tmp_path):
    path = tmp_path / "m_llm_server_metrics.csv"
    s, collector = scraper(path)
    with server(sys.executable, "-m", "tests.support.bad_server", "metrics-ok") as url:
        (metrics,) = metrics_urls(("auto",), url)
        assert s.scrape_once((metrics,), TIMEOUT_S)
        first = len(path.read_text().splitlines())  # on disk after the first round, before the run ends
        assert s.scrape_once((metrics,), TIMEOUT_S)
        seen = scrapes_seen(url)
    s.stop()
    assert seen["scrapes"] == 2 and seen["requests"] == 0  # a scrape is no request
    table = collector.results()
    (row,) = [st for key, st in table if key.model == "m"]
    assert (
        row.counts["server_scrapes"] == 2
        and row.hist["server_kv"].max == 250
        and row.hist["server_running"].max == 3000
        and row.hist["server_replicas"].max == 1000
    )
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert first == 3 and len(rows) == 4 and s.written == 4 and s.failures == 0
    assert {r["name"] for r in rows} == {"vllm:kv_cache_usage_perc", "vllm:num_requests_running"}
    assert tuple(rows[0]) == CSV_COLUMNS and {r["replica"] for r in rows} == {metrics.split("/")[2]}


@pytest.mark.parametrize("mode", ["absent", "metrics-html", "metrics-garbage", "metrics-slow"])
def test_a_metrics_endpoint_that_fails_is_counted_and_nothing_else(mode, tmp_path):
    s, collector = scraper(tmp_path / "x.csv")
    with server(sys.executable, "-m", "tests.support.bad_server", "ok" if mode == "absent" else mode) as url:
        started = time.monotonic()
        answered = s.scrape_once(metrics_urls(("auto",), url), TIMEOUT_S)
        took = time.monotonic() - started
    s.stop()
    assert not answered and s.failures == 1 and not s.written and not (tmp_path / "x.csv").exists()
    (row,) = [st for key, st in collector.results() if key.model == "m"]
    assert row.counts["server_scrape_failures"] == 1 and row.counts["server_scrapes"] == 0
    # a slow endpoint (nothing for 30 s) costs the round its deadline; the rest is the child's start (an import)
    assert took < TIMEOUT_S + metrics_fetch_start_s()


def metrics_fetch_start_s():
    """The reader process's start, measured here (it imports prometheus_client), twice over for a busy machine."""
    import subprocess

    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import locust_llm.runtime.metrics_fetch"], check=True)
    return 2 * (time.monotonic() - started)


@pytest.mark.parametrize("path", ["/hang", "/drip"])
def test_an_endpoint_that_hangs_or_drips_fails_at_its_deadline(hostile, path):
    started = time.monotonic()
    (answer,) = fetch_round([hostile + path], TIMEOUT_S, None)
    took = time.monotonic() - started
    assert "no whole answer within 0.5 s" in answer["error"] and "samples" not in answer, answer
    assert TIMEOUT_S <= took < TIMEOUT_S + DRIP_S, took  # one drip more would be the deadline not kept


def test_a_huge_answer_is_cut_at_the_cap_and_parsed_to_its_last_whole_line(hostile):
    (answer,) = fetch_round([hostile + "/huge"], 5.0, None)
    assert answer["cut"] is True and "error" not in answer, answer.get("error")
    # the filler lines are 47 bytes: the cap holds about 44,600 of them; 200 samples are kept (MAX_SAMPLES)
    assert len(answer["samples"]) == 200 and answer["samples"][-1][2] == "i=0000199;pad=" + "x" * 20
    assert MAX_BYTES == 2 << 20


def test_garbage_and_flapping_answers_fail_alone(hostile):
    ok = fetch_round([hostile + "/ok"], TIMEOUT_S, None)
    assert {s[0] for s in ok[0]["samples"]} == {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
    assert "not Prometheus text" in fetch_round([hostile + "/garbage"], TIMEOUT_S, None)[0]["error"]
    flaps = [fetch_round([hostile + "/flap"], TIMEOUT_S, None)[0] for _ in range(4)]
    assert ["error" in f for f in flaps] in ([True, False, True, False], [False, True, False, True])
    assert "HTTP 500" in next(f["error"] for f in flaps if "error" in f)


def test_a_dns_url_is_one_replica_per_address_each_named_and_asked_for_the_name(hostile, monkeypatch):
    port = int(hostile.rsplit(":", 1)[1])
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):  # a headless Service's name with two pods (both this machine's loopback)
        if host == "llm.ns.svc":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ("127.0.0.2", "127.0.0.1")]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(metrics_fetch.socket, "getaddrinfo", resolve)
    assert replicas(f"dns+http://llm.ns.svc:{port}/ok") == [
        (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/ok", f"llm.ns.svc:{port}"),
        (f"127.0.0.2:{port}", f"http://127.0.0.2:{port}/ok", f"llm.ns.svc:{port}"),
    ]
    answers = fetch_round([f"dns+http://llm.ns.svc:{port}/ok", "dns+http://nowhere.invalid:9/metrics"], 1.0, None)
    by_replica = {a["replica"]: a for a in answers}
    assert "samples" in by_replica[f"127.0.0.1:{port}"]  # the server listens on 127.0.0.1 only
    assert "error" in by_replica[f"127.0.0.2:{port}"]  # ... so the other address fails alone
    assert by_replica["dns+http://nowhere.invalid:9/metrics"]["error"].startswith("could not resolve")
