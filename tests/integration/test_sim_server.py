"""The simulator's HTTP front, over real sockets: OpenAI's streaming format, errors, and its own stats."""

import http.client
import json
import time
from urllib.parse import urlsplit

import pytest

from locust_llm.config.gc_settings import STEADY_THRESHOLD
from tests.support.procs import sim


@pytest.fixture(scope="module")
def base():
    with sim("--ttft-ms", "20", "--itl-ms", "2", "--capacity", "4", "--context-tokens", "200") as url:
        yield url


def post(base, body, path="/chat/completions"):
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", parts.path + path, raw, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def get(base, path):
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


CHAT = {"model": "sim-llm", "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 3}


def test_stream_has_openai_shape_role_content_finish_usage_done(base):
    resp, data = post(base, {**CHAT, "stream": True, "stream_options": {"include_usage": True}})
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    events = data.split(b"\n\n")
    assert events[-1] == b"" and events[-2] == b"data: [DONE]"
    chunks = [json.loads(e[len(b"data: ") :]) for e in events[:-2]]
    assert all(set(c) == {"id", "object", "created", "model", "system_fingerprint", "choices", "usage"} for c in chunks)
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:4]]
    assert len(contents) == 3 and all(isinstance(t, str) and t for t in contents)
    assert chunks[4]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["completion_tokens"] == 3
    assert chunks[5]["usage"]["total_tokens"] == chunks[5]["usage"]["prompt_tokens"] + 3
    assert all(c["usage"] is None for c in chunks[:5])


def test_stream_without_include_usage_has_no_usage_field(base):
    _, data = post(base, {**CHAT, "stream": True})
    chunks = [json.loads(e[6:]) for e in data.split(b"\n\n")[:-2]]
    assert all("usage" not in c for c in chunks) and len(chunks) == 5


def test_non_streaming_completion(base):
    resp, data = post(base, CHAT)
    body = json.loads(data)
    assert resp.status == 200 and body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] == 3 and body["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        (b"{not json", 400, None, None),
        ({"model": "sim-llm"}, 400, None, "messages"),
        ({**CHAT, "model": "nope"}, 404, "model_not_found", "model"),
        ({**CHAT, "max_tokens": 0}, 400, None, "max_tokens"),
        ({**CHAT, "max_tokens": 500}, 400, "context_length_exceeded", "messages"),
    ],
)
def test_bad_requests_get_openai_style_errors(base, body, status, code, param):
    resp, data = post(base, body)
    error = json.loads(data)["error"]
    assert resp.status == status
    assert error["type"] == "invalid_request_error" and error["message"]
    assert (error["code"], error["param"]) == (code, param)


def test_models_health_and_stats(base):
    post(base, {**CHAT, "stream": True})  # its own finished request: the test does not rely on the tests before it
    assert get(base, "/v1/models")[1]["data"][0]["id"] == "sim-llm"
    assert get(base, "/health") == (200, {"status": "ok"})
    status, stats = get(base, "/sim/stats")
    assert status == 200
    assert stats["truth"]["sim-llm"]["saturation_users"] == 4
    assert stats["models"]["sim-llm"]["finished"] >= 1
    # serving, its start-up heap is frozen and its youngest generation collected rarely
    # (locust_llm/config/gc_settings.py)
    assert stats["gc"]["threshold"] == STEADY_THRESHOLD
    assert len(stats["gc"]["collections"]) == 3 and all(n >= 0 for n in stats["gc"]["collections"])


def test_every_token_is_in_the_emission_error_and_none_is_written_far_ahead(base):
    from locust_llm.sim.timing import EARLY_NS, MAX_LEAD_NS

    for _ in range(3):
        post(base, {**CHAT, "stream": True})
    _, stats = get(base, "/sim/stats")
    emitted = sum(m["tokens_emitted"] for m in stats["models"].values())
    error, early = stats["lateness_ms"], stats["early_ms"]
    assert emitted >= 9 and error["count"] == emitted  # |written - due| of every token, early or late
    assert early["count"] <= error["count"]
    assert early["max"] <= (MAX_LEAD_NS + EARLY_NS) / 1e6  # the lead is capped: never written far ahead


def test_what_each_stream_was_delivered_is_its_schedule_moved_by_its_writes_errors(base):
    """A token due at ``d`` and written at ``d + e`` (``|e|`` <= lateness max): an ITL of 2 ms is delivered as
    ``2 + e_k - e_(k-1)``; the TTFT as 20 ms plus the first error plus the time from parsing the request to
    admitting it (a head and a role chunk written). Filed per streamed token only, afresh after a reset."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("POST", "/sim/reset-lateness")  # the module's earlier requests start afresh
    assert conn.getresponse().status == 200
    conn.close()
    for _ in range(3):
        post(base, {**CHAT, "stream": True})
    post(base, CHAT)  # not streamed: nothing delivered token by token
    _, stats = get(base, "/sim/stats")
    ttft, itl, worst = stats["delivered_ms"]["ttft"], stats["delivered_ms"]["itl"], stats["lateness_ms"]["max"]
    assert (ttft["count"], itl["count"]) == (3, 6)
    resolution = 0.01  # ms: the histogram's buckets near 2-20 ms are far finer
    assert 2 - 2 * worst - resolution <= itl["p50"] <= itl["max"] <= 2 + 2 * worst + resolution
    assert 20 - worst - resolution <= ttft["p50"] <= ttft["max"] <= 20 + worst + 100  # 100 ms: a stalled machine


def test_a_queued_request_whose_client_went_away_leaves_the_queue_and_its_rate_limit_slot_at_once():
    """A client that gives up on a request still queued (its deadline): the simulator takes it out of the queue and
    frees its concurrency slot when the connection closes, as a serving engine aborts a request whose client went
    away, not when it would have started. It did not: under overload, requests abandoned by their clients' deadlines
    held the queue and the provider's cap until their turn came, and the same run could settle with most requests
    answered or most refused (two runs of one version at 128 users and a 2 s deadline: 2,155 and 495 tokens/s)."""
    import socket
    import time

    with sim(
        "--ttft-ms",
        "20",
        "--itl-ms",
        "50",
        "--capacity",
        "1",
        "--max-concurrent-per-key",
        "2",
        "--context-tokens",
        "100000",
    ) as url:
        parts = urlsplit(url)
        body = json.dumps({**CHAT, "stream": True, "max_tokens": 200}).encode()
        request = (
            f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        running, queued = (socket.create_connection((parts.hostname, parts.port), timeout=10) for _ in range(2))
        try:
            running.sendall(request)
            running.recv(65536)  # its head and first chunks: it runs (10 s of tokens), and holds the only place
            queued.sendall(request)
            queued.recv(65536)  # its head: it waits for the running one
            _, before = get(url, "/sim/stats")
            assert before["models"]["sim-llm"]["waiting"] == 1
            queued.close()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                _, stats = get(url, "/sim/stats")
                if stats["models"]["sim-llm"]["waiting"] == 0:
                    break
                time.sleep(0.05)
            model = stats["models"]["sim-llm"]
            assert (model["waiting"], model["cancelled"], model["running"]) == (0, 1, 1), model
            with socket.create_connection((parts.hostname, parts.port), timeout=10) as another:
                another.sendall(request)  # its concurrency slot is free again: not refused (the head comes at once)
                assert another.recv(65536).startswith(b"HTTP/1.1 200 ")
        finally:
            running.close()
            queued.close()


def metrics(base):
    from prometheus_client.parser import text_string_to_metric_families

    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/plain")
    families = text_string_to_metric_families(text)  # Prometheus' own parser: the format is right
    return {(s.name, s.labels["model_name"]): s.value for f in families for s in f.samples}


@pytest.mark.slow  # a few seconds of subprocesses: the full suite only, out of the -m "not slow" loop
def test_metrics_are_vllms_names_for_the_engines_own_state():
    """A KV cache of 16 blocks of 16 tokens (256) cannot hold 6 answers of 200 tokens: while the 6 requests are in
    flight /metrics counts them all, running or waiting, with the cache in use; once all are done, nothing runs or
    waits, and the preemptions (at least one: they outgrew the cache) and KV usage are the engine's own counters."""
    from concurrent.futures import ThreadPoolExecutor

    with sim("--kv-blocks", "16", "--decode-ms", "1:5") as url:
        # alone, an answer states the default preset's cap of 100 requests per key, all but itself left
        resp, _ = post(url, {**CHAT, "stream": True})
        assert resp.getheader("x-ratelimit-limit-requests") == "100"
        assert resp.getheader("x-ratelimit-remaining-requests") == "99"
        long = {**CHAT, "stream": True, "max_tokens": 200}
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(post, url, long) for _ in range(6)]
            deadline, seen = time.monotonic() + 10, {}
            while time.monotonic() < deadline:  # until every request has reached the engine (bounded)
                seen = metrics(url)
                if seen[("vllm:num_requests_running", "sim-llm")] + seen[("vllm:num_requests_waiting", "sim-llm")] == 6:
                    break
            assert seen[("vllm:num_requests_running", "sim-llm")] + seen[("vllm:num_requests_waiting", "sim-llm")] == 6
            assert 0 < seen[("vllm:kv_cache_usage_perc", "sim-llm")] <= 1, seen
            for f in futures:
                f.result()
        after = metrics(url)
        stats = get(url, "/sim/stats")[1]["models"]["sim-llm"]
    assert after[("vllm:num_requests_running", "sim-llm")] == after[("vllm:num_requests_waiting", "sim-llm")] == 0
    assert after[("vllm:num_preemptions_total", "sim-llm")] == stats["preemptions"] >= 1
    assert after[("vllm:kv_cache_usage_perc", "sim-llm")] == pytest.approx(stats["used_blocks"] / 16)
    assert ("vllm:num_requests_running", "sim-llm-mini") in after  # every model of the preset
