"""The simulator under load and faults, over real sockets: 429s, 503s, faults, prefix caching, truth."""

import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest

from tests.support.procs import sim

CHAT = {"model": "sim-llm", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "stream": True}


def connect(base):
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=20), parts.path


def send(base, body=None, key="k1", agent="test-client"):
    conn, path = connect(base)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}", "User-Agent": agent}
    conn.request("POST", path + "/chat/completions", json.dumps(body or CHAT).encode(), headers)
    return conn, conn.getresponse()


def request(base, body=None, **kw):
    conn, resp = send(base, body, **kw)
    data = resp.read()
    conn.close()
    return resp, data


def stats(base):
    conn, _ = connect(base)
    conn.request("GET", "/sim/stats")
    body = json.loads(conn.getresponse().read())
    conn.close()
    return body


def test_concurrency_cap_answers_429_with_retry_after_and_counts_early_returns():
    with sim(
        "--max-concurrent-per-key", "1", "--retry-after-s", "2", "--itl-ms", "50", "--ttft-ms", "10", "--capacity", "8"
    ) as base:
        held, first = send(base, {**CHAT, "max_tokens": 40})  # ~2 s of streaming keeps the slot
        assert first.status == 200
        resp, data = request(base)
        error = json.loads(data)["error"]
        assert resp.status == 429 and error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
        assert resp.getheader("Retry-After") == "2" and resp.getheader("retry-after-ms") == "2000"
        request(base)  # the same client comes straight back: an early return
        assert request(base, key="k2")[0].status == 200  # another key has its own cap
        first.read()
        held.close()
        s = stats(base)["models"]["sim-llm"]
        assert s["rejected_429"] == 2 and s["early_returns_after_429"] == 1
        assert s["requests_by_status"] == {"200": 2, "429": 2}


def test_tpm_limit():
    with sim("--tpm", "600", "--ttft-ms", "1", "--itl-ms", "1", "--capacity", "8") as base:
        body = {**CHAT, "max_tokens": 500}  # costs 9 prompt + 500 tokens
        assert request(base, body)[0].status == 200
        resp, data = request(base, body)  # 91 left: 418 short at 10 tokens/s
        assert resp.status == 429 and "tokens per min" in json.loads(data)["error"]["message"]
        assert resp.getheader("Retry-After") == "42"
        assert 41_000 <= int(resp.getheader("retry-after-ms")) <= 41_800


def test_overload_answers_503():
    with sim("--capacity", "1", "--ttft-ms", "10", "--itl-ms", "50", "--overload-queue", "1") as base:
        a = send(base, {**CHAT, "max_tokens": 20})
        b = send(base, {**CHAT, "max_tokens": 20})
        resp, data = request(base)
        assert resp.status == 503 and json.loads(data)["error"]["type"] == "server_error"
        for conn, r in (a, b):
            r.read()
            conn.close()
        assert stats(base)["models"]["sim-llm"]["rejected_503_overload"] == 1


def sse_events(data):
    return [e for e in data.split(b"\n\n") if e]


@pytest.fixture(scope="module")
def faulty():
    script = "500,502,503,reset,malformed,no-done,close,ok"
    with sim("--fault-script", script, "--ttft-ms", "1", "--itl-ms", "1", "--capacity", "4", "--stall-s", "2") as base:
        yield base


def test_fault_script_runs_every_fault_in_turn(faulty):
    body = {**CHAT, "max_tokens": 6, "stream_options": {"include_usage": True}}
    for status in (500, 502, 503):
        resp, data = request(faulty, body)
        assert resp.status == status and json.loads(data)["error"]["type"] == "server_error"
    conn, resp = send(faulty, body)  # reset mid-stream
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        resp.read()
    conn.close()
    resp, data = request(faulty, body)  # malformed chunk mid-stream
    assert any(
        e.startswith(b'data: {"choices": [{"index": 0, "delta": {"content": "') and not e.endswith(b"}")
        for e in sse_events(data)
    )
    resp, data = request(faulty, body)  # no [DONE]
    events = sse_events(data)
    assert resp.status == 200 and b"data: [DONE]" not in events and b'"finish_reason":"length"' in events[-1]
    conn, resp = send(faulty, body)  # close after the response although keep-alive was advertised
    assert resp.getheader("Connection") == "keep-alive"
    assert sse_events(resp.read())[-1] == b"data: [DONE]"
    conn.sock.settimeout(5)
    assert conn.sock.recv(1) == b""  # the server closed the connection
    conn.close()
    resp, data = request(faulty, body)
    assert sse_events(data)[-1] == b"data: [DONE]"
    injected = stats(faulty)["models"]["sim-llm"]["faults_injected"]
    assert injected == {k: 1 for k in ("500", "502", "503", "reset", "malformed", "no-done", "close")}


def test_stall_holds_the_connection_without_tokens():
    with sim("--fault", "stall:1", "--ttft-ms", "1", "--itl-ms", "1", "--capacity", "4", "--stall-s", "30") as base:
        parts = urlsplit(base)
        body = json.dumps({**CHAT, "max_tokens": 10}).encode()
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.create_connection((parts.hostname, parts.port), timeout=1.5) as sock:
            sock.sendall(head.encode() + body)
            received = b""
            with pytest.raises(TimeoutError):
                while chunk := sock.recv(65536):
                    received += chunk
        tokens = received.count(b'"content":"') - 1  # minus the role chunk
        assert tokens == 5  # stalled in the middle of 10 tokens, connection still open


def test_prefix_cache_hits_for_a_repeated_system_prompt():
    system = {"role": "system", "content": "You are a terse assistant. " * 40}
    with sim("--prefill-ms-per-1k", "200") as base:
        for i in range(3):
            body = {**CHAT, "messages": [system, {"role": "user", "content": f"question {i}"}], "max_tokens": 2}
            assert request(base, body)[0].status == 200
        s = stats(base)["models"]["sim-llm"]
        assert s["prefix_hits"] == 2 and s["prefix_hit_tokens"] > 0


def test_truth_and_models_endpoints_serve_several_models():
    with sim("--add-model", "sim-llm-2:kv_blocks=400,max_concurrent=5") as base:
        conn, _ = connect(base)
        conn.request("GET", "/v1/models")
        assert [m["id"] for m in json.loads(conn.getresponse().read())["data"]] == [
            "sim-llm",
            "sim-llm-mini",
            "sim-llm-2",
        ]
        conn.request("GET", "/sim/truth?model=sim-llm-2&users=64&prompt_tokens=30&max_tokens=128")
        truth = json.loads(conn.getresponse().read())
        conn.close()
        assert truth["provider_cap_users"] == 5 and truth["saturation_users"] > 41
        assert truth["steady"]["users"] == 64 and truth["steady"]["ttft_s"] > 0
        assert request(base, {**CHAT, "model": "sim-llm-2"})[0].status == 200
