"""A small HTTP server that misbehaves on purpose: ``python -m tests.support.bad_server MODE``.

Modes:

- ``unauthorized``: 401 with an OpenAI-style JSON error that echoes the key;
- ``cut``: 200 SSE, two tokens, then the connection is dropped;
- ``json200``: 200 with a JSON body although a stream was asked for;
- ``ok``: a proper short stream (three tokens, usage, ``[DONE]``);
- ``no-done``: three tokens, a finish chunk and usage, then the body ends without ``[DONE]`` (older TGI, llama.cpp);
- ``no-finish``: three tokens and usage, then the body ends: neither a finish_reason nor ``[DONE]``;
- ``revoke:N``: ``ok`` for the first N requests, then 401 (a key revoked mid-run);
- ``cr``, ``crlf``: ``ok`` with lines ending in CR alone / CRLF; ``keepalive``: ``ok`` with bare ``data:`` lines;
- ``ratelimit-stream``: a 200 stream whose first event is a rate-limit error object;
- ``echo-stream-error``: a 200 stream whose error object echoes the key;
- ``retry-after:VALUE``: 429 with ``Retry-After: VALUE`` for every request;
- ``retry-after-first:VALUE``: 429 with ``Retry-After: VALUE`` for the first request (the preflight), then ``ok``;
- ``http500``, ``http502``: that status at once, for every request;
- ``no-stream-options``: HTTP 400 for a body with ``stream_options`` (as servers that do not know the field answer),
  else three tokens and ``[DONE]``, with no usage;
- ``mixed``: after the first request (``ok``, the preflight), each in turn: ``ok``, a 500, a reset mid-stream, a
  malformed chunk, no ``[DONE]`` after a finish_reason, ``ok`` and then the connection closed although kept alive,
  an event of 1.5 MiB in one chunk, a stall after the first token (longer than the run's request timeout);
- ``metrics-ok``, ``metrics-html``, ``metrics-garbage``, ``metrics-slow``: what ``GET /metrics`` answers (two
  vLLM gauges, a web page, bytes that are no metrics, nothing for 30 s); every other mode answers it 404, and a
  scrape is never counted as a request (``scrapes`` apart). Chat requests are answered as ``ok``. Any other GET
  (the target's fingerprint: ``/v1/models``, ``/props``, ...) is answered 404 and counted apart (``probes``).

A POST to any path but ``/v1/chat/completions`` is answered 404 (``{"detail":"Not Found"}``, as vLLM answers a route
it does not serve). ``GET /seen`` answers ``{"requests": N, "auth": [every Authorization header seen], "headers":
{name: values}, "times": [time.monotonic() when each request's head arrived]}``.
Binds 127.0.0.1 (or the address given after the mode) on a free port; prints ``listening on http://HOST:PORT/v1`` when
ready.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
DONE = b"data: [DONE]\n\n"
SEEN: dict = {"requests": 0, "auth": [], "headers": {}, "times": [], "scrapes": 0, "probes": 0}


def _response(status: str, content_type: str, body: bytes, chunked: bool = False, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{extra}"
    if chunked:
        return head.encode() + b"Transfer-Encoding: chunked\r\n\r\n"
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _stream(writer: asyncio.StreamWriter, events: list[bytes], newline: bytes = b"\n") -> None:
    writer.write(_response("200 OK", "text/event-stream", b"", chunked=True))
    for event in events:
        writer.write(_chunk(event.replace(b"\n", newline)))
        await writer.drain()
        await asyncio.sleep(0.005)
    writer.write(b"0\r\n\r\n")


def _error(message: bytes, code: bytes = b"") -> bytes:
    return b'data: {"error": {"message": "' + message + b'", "type": "requests", "code": "' + code + b'"}}\n\n'


MIXED = ("ok", "http500", "cut", "malformed", "no-done", "close", "huge", "stall")
HUGE = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * (3 << 19) + b'"},"finish_reason":null}]}\n\n'


async def answer(mode: str, key: bytes, writer: asyncio.StreamWriter, body: bytes = b"") -> bool:
    """Answer one request (its ``body``); False when the connection must be dropped."""
    name, _, arg = mode.partition(":")
    if name == "no-stream-options":
        if b'"stream_options"' in body:
            error = b'{"error": {"message": "Unrecognized request argument supplied: stream_options"}}'
            writer.write(_response("400 Bad Request", "application/json", error))
        else:
            await _stream(writer, [TOKEN, TOKEN, TOKEN, FINISH, DONE])
        await writer.drain()
        return True
    ok = [TOKEN, TOKEN, TOKEN, USAGE, DONE]
    if name.startswith("metrics-"):
        name = "ok"
    if name == "mixed":
        name = "ok" if SEEN["requests"] == 1 else MIXED[(SEEN["requests"] - 2) % len(MIXED)]
    if name == "malformed":
        await _stream(writer, [TOKEN, b'data: {"choices": [oops\n\n', TOKEN, USAGE, DONE])
        return True
    if name == "close":
        await _stream(writer, ok)
        await writer.drain()
        return False
    if name == "huge":
        await _stream(writer, [HUGE, TOKEN, USAGE, DONE])
        return True
    if name == "stall":
        writer.write(_response("200 OK", "text/event-stream", b"", chunked=True) + _chunk(TOKEN))
        await writer.drain()
        await asyncio.sleep(30)
        return False
    if name == "unauthorized" or (name == "revoke" and SEEN["requests"] > int(arg)):
        body = (
            b'{"error": {"message": "Incorrect API key provided: ' + key + b'.", "type": '
            b'"invalid_request_error", "code": "invalid_api_key"}}'
        )
        writer.write(_response("401 Unauthorized", "application/json", body))
    elif name == "json200":
        writer.write(_response("200 OK", "application/json", b'{"choices": [{"message": {"content": "x"}}]}'))
    elif name == "cut":
        writer.write(_response("200 OK", "text/event-stream", b"", chunked=True))
        for _ in range(2):
            writer.write(_chunk(TOKEN))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.transport.abort()
        return False
    elif name in ("ok", "revoke"):
        await _stream(writer, ok)
    elif name == "no-done":
        await _stream(writer, [TOKEN, TOKEN, TOKEN, FINISH, USAGE])
    elif name == "no-finish":
        await _stream(writer, [TOKEN, TOKEN, TOKEN, USAGE])
    elif name in ("cr", "crlf"):
        await _stream(writer, ok, b"\r" if name == "cr" else b"\r\n")
    elif name == "keepalive":
        await _stream(writer, [b"data:\n\n", TOKEN, b"data: \n\n", TOKEN, b": ping\n\n", TOKEN, USAGE, DONE])
    elif name == "ratelimit-stream":
        await _stream(writer, [_error(b"Rate limit reached for requests", b"rate_limit_exceeded")])
    elif name == "echo-stream-error":
        await _stream(writer, [TOKEN, _error(b"internal error for key " + key, b"server_error")])
    elif name == "retry-after-first" and SEEN["requests"] > 1:
        await _stream(writer, ok)
    elif name in ("http500", "http502"):
        body = b'{"error": {"message": "upstream failed", "type": "server_error"}}'
        writer.write(_response(f"{name[4:]} Server Error", "application/json", body))
    elif name in ("retry-after", "retry-after-first"):
        body = b'{"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}'
        writer.write(_response("429 Too Many Requests", "application/json", body, extra=f"Retry-After: {arg}\r\n"))
    await writer.drain()
    return True


METRICS = (
    b'# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name="m"} 0.25\n'
    b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n'
)


async def _metrics(mode: str, writer: asyncio.StreamWriter) -> None:
    if mode == "metrics-ok":
        writer.write(_response("200 OK", "text/plain; version=0.0.4", METRICS))
    elif mode == "metrics-html":
        writer.write(_response("200 OK", "text/html", b"<html><body>Grafana login</body></html>"))
    elif mode == "metrics-garbage":
        writer.write(_response("200 OK", "text/plain", b"\x00\x01 not metrics {{{\n"))
    elif mode == "metrics-slow":
        await asyncio.sleep(30)
    else:
        writer.write(_response("404 Not Found", "text/plain", b"404: Not Found"))
    await writer.drain()


async def handle(mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            auth = b""
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                SEEN["headers"].setdefault(name.decode().lower(), []).append(value.strip().decode())
                if name.lower() == b"content-length":
                    length = int(value)
                if name.lower() == b"authorization":
                    auth = value.strip()
            body = await reader.readexactly(length)
            if head.startswith(b"GET /seen"):
                writer.write(_response("200 OK", "application/json", json.dumps(SEEN).encode()))
                await writer.drain()
                continue
            if head.startswith(b"GET /metrics"):  # not a request: what a scraper finds (404 but in metrics-* modes)
                SEEN["scrapes"] += 1
                await _metrics(mode, writer)
                continue
            if head.startswith(b"GET "):  # not a request: the target's fingerprint asks /v1/models, /props, ...
                SEEN["probes"] += 1
                writer.write(_response("404 Not Found", "application/json", b'{"detail":"Not Found"}'))
                await writer.drain()
                continue
            SEEN["requests"] += 1
            SEEN["times"].append(time.monotonic())
            SEEN["auth"].append(auth.decode())
            if not head.startswith(b"POST /v1/chat/completions "):  # as vLLM answers a route it does not serve
                writer.write(_response("404 Not Found", "application/json", b'{"detail":"Not Found"}'))
                await writer.drain()
                continue
            if not await answer(mode, auth.split(b" ", 1)[-1], writer, body):
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(mode: str, host: str = "127.0.0.1") -> None:
    server = await asyncio.start_server(lambda r, w: handle(mode, r, w), host, 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
