"""Routes across providers (--routes), end to end: simulators on their own ports, each with its own key and caps.

Every run of the module is made at once (light loads, each against its own simulators): a fallback chain in a
distributed run (--processes 2), the same sweep with and without the chain, hedging to a fast route, and a route
that is down at the preflight. Each simulator counts the requests of each key it saw (``requests_by_key``: a
fingerprint, never the key), so "each key goes only to its own host" is read from the servers themselves.
"""

import contextlib
import hashlib
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.test_report_browser import chromium, headless
from tests.integration.test_web_ui import fetch, wait_for, web_ui
from tests.support.procs import (
    LOCUSTFILE,
    PREFLIGHT_REQUESTS,
    accepted,
    at_once,
    clean_env,
    free_port,
    read_csv,
    run_locust,
    sim,
)

pytestmark = pytest.mark.slow

KEYS = {"KEY_CAPPED": "sk-capped-AAAA1111", "KEY_LOCAL": "sk-local-BBBB2222", "KEY_SLOW": "sk-slow-CCCC3333"}
CAP = 2  # --max-concurrent-per-key of the capped simulators
USERS = 8
RETRY_AFTER_S = 2  # the capped simulators' Retry-After: what a client request waits under honor without the chain
# short answers (16 tokens, ~0.2 s): a client request refused and retried 2 s later still ends inside the window
SWEEP = (
    "--steps",
    str(USERS),
    "--step-duration",
    "6s",
    "--warmup",
    "1s",
    "--min-step-requests",
    "1",
    "--max-tokens",
    "16",
)


def fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/sim/stats", timeout=10) as response:
        return json.load(response)


def route(name: str, url: str, model: str, key_env: str | None = None, extra: str = "") -> str:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    return f'[[route]]\nname = "{name}"\nbase_url = "{url}"\nmodel = "{model}"\n{key}{extra}\n'


def closed_port_url() -> str:
    with socket.socket() as s:  # bound and closed: connections to it are refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def go(tmp_path, name, text, *extra):
    where = tmp_path / name
    where.mkdir()
    (where / "routes.toml").write_text(text)
    result = run_locust(
        "--headless", "--routes", "routes.toml", *SWEEP, "--csv", "run", *extra, cwd=where, env=clean_env(**KEYS)
    )
    return where, result


def from_the_web_ui(tmp, url_a, url_b):
    """A run started from the web UI's form; the form's attempts to change the routes, the host or the model."""
    where = tmp / "webui"
    where.mkdir()
    (where / "routes.toml").write_text(
        route("a", url_a, "sim-llm", "KEY_CAPPED")
        + route("b", url_b, "local-llm", "KEY_LOCAL")
        + '[policy]\nfallback = ["b"]\n'
    )
    (where / "other.toml").write_text(route("c", url_b, "local-llm", "KEY_CAPPED"))
    answers = {}
    with web_ui(where, "--routes", "routes.toml", *SWEEP, "--csv", "run", env=clean_env(**KEYS)) as base:
        for name, form in (
            ("routes", {"routes": "other.toml"}),
            ("host", {"host": url_b}),
            ("model", {"model": "local-llm"}),
        ):
            answers[name] = json.loads(fetch(base + "/swarm", form))
        answers["start"] = json.loads(fetch(base + "/swarm", {"host": url_a}))
        answers["finished"] = wait_for(base, "finished")
    answers["output"] = web_ui.output
    return where, answers


MIDRUN_USERS = 4


def down_mid_run(tmp, ok_url):
    """A primary route whose server goes away in the middle of the step (its process ends): refused from then on."""
    where = tmp / "midrun"
    where.mkdir()
    with sim("--model", "flaky-llm") as flaky:
        (where / "routes.toml").write_text(
            route("flaky", flaky, "flaky-llm", "KEY_CAPPED")
            + route("ok", ok_url, "local-llm", "KEY_LOCAL")
            + '[policy]\nfallback = ["ok"]\nfallback_on = [429, 503, "connect_error"]\n'
        )
        cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--routes", "routes.toml"]
        cmd += ["--steps", str(MIDRUN_USERS), "--step-duration", "7s", "--warmup", "1s", "--max-tokens", "4"]
        cmd += ["--min-step-requests", "1", "--csv", "run", "--seed", "7"]
        proc = subprocess.Popen(
            cmd, cwd=where, env=clean_env(**KEYS), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stderr is not None
        for line in proc.stderr:  # the step has begun: the server goes away a few seconds into it
            if "locust-llm step 1/1:" in line:
                break
        time.sleep(2)  # when it goes is no tolerance: anywhere inside the 7 s step will do
    out, err = proc.communicate(timeout=120)
    return where, proc.returncode, out, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("routes")
    port = str(free_port())  # the distributed run's master: its workers connect there, not to Locust's 5557
    capped = ("--max-concurrent-per-key", str(CAP), "--retry-after-s", str(RETRY_AFTER_S))
    prices = "prices = { input = 2.0, output = 10.0 }\n"
    with contextlib.ExitStack() as stack:
        up = {
            name: stack.enter_context(sim(*args))
            for name, args in {
                "capped": capped,
                "local": ("--model", "local-llm"),
                "chain_capped": capped,
                "alone_capped": capped,
                "chain_local": ("--model", "local-llm"),
                "ui_a": (),
                "ui_b": ("--model", "local-llm"),
                "slow": ("--model", "slow-llm", "--decode-ms", "1:150,64:150"),
                "fast": ("--model", "fast-llm"),
            }.items()
        }
        down = closed_port_url()
        policy_none = '[policy]\nfallback = ["local"]\nretry_policy = "none"\n'
        jobs = {
            "distributed": lambda: go(
                tmp,
                "distributed",
                route("capped", up["capped"], "sim-llm", "KEY_CAPPED", prices)
                + route("local", up["local"], "local-llm", "KEY_LOCAL")
                + policy_none,
                "--processes",
                "2",
                "--master-bind-port",
                port,
                "--master-port",
                port,
                "--fast-path",  # routes on the library path: each key still only to its own host
                "off",
            ),
            "chain": lambda: go(
                tmp,
                "chain",
                route("capped", up["chain_capped"], "sim-llm", "KEY_CAPPED", prices)
                + route(
                    "local", up["chain_local"], "local-llm", "KEY_LOCAL", "prices = { input = 1.0, output = 5.0 }\n"
                )
                + '[policy]\nfallback = ["local"]\n',
            ),
            "alone": lambda: go(tmp, "alone", route("capped", up["alone_capped"], "sim-llm", "KEY_CAPPED", prices)),
            "hedge": lambda: go(
                tmp,
                "hedge",
                route("slow", up["slow"], "slow-llm", "KEY_SLOW")
                + route("fast", up["fast"], "fast-llm", "KEY_LOCAL")
                + '[policy]\nhedge_ttft_ms = 60\nhedge_to = "fast"\n',
            ),
            "down": lambda: go(
                tmp, "down", route("gone", down, "m", "KEY_CAPPED") + route("ok", up["chain_local"], "local-llm")
            ),
            "allow_down": lambda: go(
                tmp,
                "allow_down",
                route("gone", down, "m", "KEY_CAPPED")
                + route("ok", up["chain_local"], "local-llm")
                + '[policy]\nfallback = ["ok"]\n',
                "--routes-allow-down",
            ),
        }
        jobs["webui"] = lambda: from_the_web_ui(tmp, up["ui_a"], up["ui_b"])
        jobs["midrun"] = lambda: down_mid_run(tmp, up["chain_local"])
        done = at_once(jobs)
        servers = {name: stats(url) for name, url in up.items()}
    return done, servers


def rows(where):
    return read_csv(where / "run_llm_steps.csv")


def test_the_fallback_moves_exactly_the_refused_share_and_each_key_stays_on_its_host_across_workers(runs):
    (where, result), servers = runs[0]["distributed"], runs[1]
    assert accepted(result.returncode, result.stdout), result.stderr[-2000:]
    capped, local = servers["capped"], servers["local"]
    # each simulator saw one key, its own (the preflight, then both workers' requests)
    assert set(capped["requests_by_key"]) == {fingerprint(KEYS["KEY_CAPPED"])}
    assert set(local["requests_by_key"]) == {fingerprint(KEYS["KEY_LOCAL"])}
    refused = capped["requests_by_status"].get("429", 0)
    moved = sum(local["requests_by_status"].values()) - PREFLIGHT_REQUESTS  # less its preflight's
    assert refused > 0
    # retry_policy none: every refusal goes to the fallback at once, and only a refusal does; a user stopped between
    # a refusal and its fallback (at most one per user, at the end) is the only slack
    assert 0 <= refused - moved <= USERS
    assert "KEY" not in result.stdout + result.stderr and "sk-" not in result.stdout + result.stderr
    by_route = {r["route"]: r for r in rows(where)}
    assert set(by_route) == {"capped", "local"} and by_route["local"]["model"] == "local-llm"
    assert int(by_route["local"]["served"]) > 0 and by_route["capped"]["extra_cost_usd"] == "0.0"
    summary = json.loads((where / "run_llm_summary.json").read_text())
    assert summary["model"] == "capped" and summary["routes"]["routes"] == ["capped", "local"]
    assert "sk-" not in json.dumps(summary)


def test_the_chain_keeps_the_client_tail_below_the_retry_after_wait_the_primary_alone_imposes(runs):
    (chain_dir, chain), (alone_dir, alone) = runs[0]["chain"], runs[0]["alone"]
    assert accepted(chain.returncode, chain.stdout) and accepted(alone.returncode, alone.stdout), (
        chain.stderr[-1000:] + alone.stderr[-1000:]
    )
    with_chain = {r["route"]: r for r in rows(chain_dir)}
    primary_alone = rows(alone_dir)[0]
    # alone, the capped route serves at most CAP=2 streams at once while 8 users ask: its users wait out the
    # Retry-After (2 s) and most of their client requests do not end inside the window; with the chain all 8 are
    # served at once (the fallback never refuses), about 4x as many per second at the same request length (16
    # tokens; the decode step at a batch of 6 is no more than 1.2x that at 2): at least twice as many, with margin
    alone_served = int(primary_alone["client_ok"])
    assert float(primary_alone["retry_wait_s"]) > 0
    assert sum(int(r["client_ok"]) for r in with_chain.values()) >= 2 * alone_served > 0
    # and no client request of the chain waited: a refusal goes to the fallback at once (the simulator's TTFT is
    # ~25 ms; half the Retry-After leaves room for any stall of this machine)
    assert float(with_chain["capped"]["client_ttft_p99_ms"]) < RETRY_AFTER_S * 1000 / 2
    # the capped route serves at most CAP streams of 8; at a smaller batch its streams are no faster than 1.2x the
    # fallback's (the preset's decode step by batch size), so it serves at most 2/8 * 1.2 = 30 %: the rest moved
    served = {name: int(row["served"]) for name, row in with_chain.items()}
    assert served["local"] / sum(served.values()) >= 0.6
    summary = json.loads((chain_dir / "run_llm_summary.json").read_text())
    step = summary["routes"]["steps"][-1]
    assert step["extra_cost_share"] is not None and step["extra_cost_share"] > 0
    assert set(runs[1]["alone_capped"]["requests_by_key"]) == {fingerprint(KEYS["KEY_CAPPED"])}  # its retries too
    report = (chain_dir / "run_llm_report.html").read_text()
    assert "<th>route</th>" in report and "<th>extra cost $</th>" in report
    line = re.search(
        r"routes: with fallback, client TTFT p99 at 8 users .*% served by local; [+-]\d+% cost", chain.stdout
    )
    assert line, chain.stdout[-3000:]


def test_compare_prints_the_chain_against_the_primary_alone(runs):
    import subprocess
    import sys

    (chain_dir, _), (alone_dir, _) = runs[0]["chain"], runs[0]["alone"]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust_llm.cli",
            "compare",
            str(alone_dir / "run_llm_summary.json"),
            str(chain_dir / "run_llm_summary.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert re.search(r"with fallback, client TTFT p99 at 8 users \S+ \S+ \(primary alone: \d", out.stdout), out.stdout


def test_a_slow_route_is_hedged_to_a_fast_one_and_the_winner_is_counted_once(runs):
    (where, result), servers = runs[0]["hedge"], runs[1]
    assert accepted(result.returncode, result.stdout), result.stderr[-2000:]
    by_route = {r["route"]: r for r in rows(where)}
    slow = by_route["slow"]
    # the slow route's first token takes a 150 ms decode step, past the 60 ms hedge: every client request is hedged
    assert int(slow["hedges"]) > 0 and int(slow["hedge_wins"]) > 0
    served = sum(int(r["served"]) for r in by_route.values())
    assert served == int(slow["client_ok"])  # one client request, one answer, whichever route won
    assert set(servers["slow"]["requests_by_key"]) == {fingerprint(KEYS["KEY_SLOW"])}
    assert set(servers["fast"]["requests_by_key"]) == {fingerprint(KEYS["KEY_LOCAL"])}


def test_a_route_down_at_the_preflight_stops_the_run_by_name_or_is_dropped_when_allowed(runs):
    (_, stopped), (where, dropped) = runs[0]["down"], runs[0]["allow_down"]
    assert stopped.returncode == 2
    assert "route 'gone': the first request to http://127.0.0.1:" in stopped.stderr + stopped.stdout
    assert accepted(dropped.returncode, dropped.stdout), dropped.stderr[-2000:]
    assert "route 'gone' dropped (--routes-allow-down)" in dropped.stderr
    assert {r["route"] for r in rows(where)} == {"ok"}


def test_the_web_ui_runs_the_routes_and_its_form_cannot_change_them(runs):
    (_, answers), servers = runs[0]["webui"], runs[1]
    assert not answers["routes"]["success"] and "may not change 'routes'" in answers["routes"]["message"]
    assert (
        not answers["host"]["success"]
        and "with --routes the start form may not change 'host'" in answers["host"]["message"]
    )
    assert not answers["model"]["success"] and "may not change 'model'" in answers["model"]["message"]
    assert answers["start"]["success"], answers["start"]
    assert {r["route"] for r in answers["finished"]["rows"]} >= {"a"}
    assert set(servers["ui_a"]["requests_by_key"]) == {fingerprint(KEYS["KEY_CAPPED"])}
    assert set(servers["ui_b"]["requests_by_key"]) <= {fingerprint(KEYS["KEY_LOCAL"])}
    assert "sk-" not in answers["output"]


def test_a_route_that_goes_down_mid_run_is_fallen_back_from_and_cooled_down_not_hammered(runs):
    where, code, out, err = runs[0]["midrun"]
    assert accepted(code, out), err[-3000:]  # a route going down does not stop the run: its fallback serves
    by_route = {r["route"]: r for r in rows(where)}
    flaky, ok = by_route["flaky"], by_route["ok"]
    refused = int(flaky["conn_errors"])
    assert refused > 0 and int(flaky["route_cooldowns"]) > 0 and int(ok["served"]) > 0
    # without the route's own cool-down every client request would try it first: about 4 users x 5 s / 0.06 s
    # (4-token answers) = 330 refused connections after it went; with it, each user tries again after full-jitter
    # waits of up to 0.5, 1, 2, 4 s (--backoff-base 0.5 s doubling): about 5 tries each in those seconds
    assert refused <= 10 * MIDRUN_USERS
    assert int(flaky["client_requests"]) - int(flaky["client_ok"]) <= MIDRUN_USERS  # cut mid-stream when it went


def test_the_chains_report_renders_each_route_in_a_browser(runs, tmp_path):
    chain_dir, _ = runs[0]["chain"]
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", (chain_dir / "run_llm_report.html").as_uri())
    status = re.search(r'id="render-status">rendered (\d+) charts, (\d+) errors<', proc.stdout)
    assert status and status.group(2) == "0", proc.stderr[-2000:]
    headers = re.findall(r"<th>([^<]*)</th>", proc.stdout)
    assert {"route", "served", "client TTFT p99 ms", "extra cost $"} <= set(headers)
    assert re.search(r"<td>local</td>", proc.stdout) and re.search(r"<td>capped</td>", proc.stdout)
