"""The scraper against servers whose /metrics is good, absent, a web page, garbage or slow: what answers is filed on
the timeline, the rest is counted as a failed scrape and nothing else happens."""

import json
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest

from locust_llm.runtime.collector import Collector
from locust_llm.runtime.server_scraper import ServerScraper, metrics_urls
from tests.support.procs import server

TIMEOUT_S = 0.5


def scraper():
    runner = SimpleNamespace(send_message=lambda *a, **k: None, clients=SimpleNamespace(all=[]))
    collector = Collector(SimpleNamespace(runner=runner, events=None), "local")
    collector.begin_step(1, 4, warmup_ns=0)
    return ServerScraper(collector, lambda: "m", lambda: None), collector


def scrapes_seen(url):
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
        return json.load(resp)


def test_auto_is_the_hosts_origin():
    assert metrics_urls(("auto",), "https://gw.example.com:8443/v1") == ("https://gw.example.com:8443/metrics",)
    assert metrics_urls((), "http://h/v1") == () and metrics_urls(("http://a/m",), None) == ("http://a/m",)


def test_good_metrics_are_filed_on_the_timeline_with_their_raw_samples():
    s, collector = scraper()
    with server(sys.executable, "-m", "tests.support.bad_server", "metrics-ok") as url:
        (metrics,) = metrics_urls(("auto",), url)
        assert s.scrape_once((metrics,), TIMEOUT_S) and s.scrape_once((metrics,), TIMEOUT_S)
        seen = scrapes_seen(url)
    assert seen["scrapes"] == 2 and seen["requests"] == 0  # a scrape is no request
    table = collector.results()
    (row,) = [st for key, st in table if key.model == "m"]
    assert (
        row.counts["server_scrapes"] == 2
        and row.hist["server_kv"].max == 250
        and row.hist["server_running"].max == 3000
    )
    assert {r[4] for r in s.rows} == {"vllm:kv_cache_usage_perc", "vllm:num_requests_running"} and s.failures == 0


@pytest.mark.parametrize("mode", ["absent", "metrics-html", "metrics-garbage", "metrics-slow"])
def test_a_metrics_endpoint_that_fails_is_counted_and_nothing_else(mode):
    s, collector = scraper()
    with server(sys.executable, "-m", "tests.support.bad_server", "ok" if mode == "absent" else mode) as url:
        started = time.monotonic()
        answered = s.scrape_once(metrics_urls(("auto",), url), TIMEOUT_S)
        took = time.monotonic() - started
    assert not answered and s.failures == 1 and not s.rows
    (row,) = [st for key, st in collector.results() if key.model == "m"]
    assert row.counts["server_scrape_failures"] == 1 and row.counts["server_scrapes"] == 0
    # a slow endpoint costs the scrape its own timeout, no more (the server answers nothing for 30 s)
    assert took < 10 * TIMEOUT_S
