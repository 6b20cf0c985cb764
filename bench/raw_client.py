"""The floor: a raw asyncio ``Protocol`` streaming client that splits events on blank lines and does nothing else.

``python bench/raw_client.py URL MODEL STREAMS MAX_TOKENS SECONDS WARMUP_S [asyncio]`` runs STREAMS closed-loop
users, one keep-alive connection each (first requests spread over one second), and prints one JSON line like
``bench/aiohttp_client.py``: TTFT/ITL p50/p99 (ms) of the samples between WARMUP_S and SECONDS - 1, and the tokens
received in that window. It runs on uvloop when installed (the physical floor), or on asyncio's own loop with the
last argument ``asyncio`` (the floor as the ``[perf]`` issue measured it). No HTTP library, no JSON parsing: a token
is an event holding a non-empty ``"content":"``; a response ends at the chunked body's ``0\\r\\n\\r\\n``. What is
left is what the kernel and the event loop cost: the floor a Python generator can approach (plain HTTP only).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
import urllib.parse

from locust_llm.measure.histogram import Histogram


def request_for(url: str, model: str, max_tokens: int) -> tuple[urllib.parse.SplitResult, bytes]:
    """The URL's parts and the one request every stream sends, as bytes."""
    parts = urllib.parse.urlsplit(url)
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "bench"}], "max_tokens": max_tokens, "stream": True}
    ).encode()
    request = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: "
        f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    return parts, request


def take(stream, data: bytes, now: int) -> bool:
    """Split ``data`` into events, record the stream's tokens inside the window; True when the response ended.

    ``stream`` has ``buffer``, ``last``, ``sent``, ``window`` and ``stats`` (shared by the gevent floor)."""
    stream.buffer += data
    *events, stream.buffer = stream.buffer.split(b"\n\n")
    inside = stream.window[0] <= now <= stream.window[1]
    stats = stream.stats
    for event in events:
        if b'"content":"' not in event or b'"content":""' in event:
            continue
        if stream.last is None:
            if inside:
                stats["ttft"].record(now - stream.sent)
        elif inside:
            stats["itl"].record(now - stream.last)
        if inside:
            stats["tokens"] += 1
        stream.last = now
    return stream.buffer.endswith(b"0\r\n\r\n")


def report(stats: dict) -> None:
    """Print the JSON line the generator bench reads."""

    def q(h, p):
        return round(h.quantile(p) / 1e6, 3)

    print(
        json.dumps(
            {
                "ttft_p50_ms": q(stats["ttft"], 0.5),
                "ttft_p99_ms": q(stats["ttft"], 0.99),
                "itl_p50_ms": q(stats["itl"], 0.5),
                "itl_p99_ms": q(stats["itl"], 0.99),
                "tokens": stats["tokens"],
            }
        ),
        flush=True,
    )


def new_stats() -> dict:
    return {"ttft": Histogram(), "itl": Histogram(), "tokens": 0}


class Stream(asyncio.Protocol):
    def __init__(self, request: bytes, window: tuple[int, int], end: float, stats: dict, done: asyncio.Future):
        self.request, self.window, self.end, self.stats, self.done = request, window, end, stats, done
        self.buffer = b""
        self.sent = 0
        self.last: int | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        asyncio.get_running_loop().call_later(random.random(), self.send)

    def send(self) -> None:
        if time.perf_counter() >= self.end:
            self.transport.close()
            return
        self.sent, self.last, self.buffer = time.perf_counter_ns(), None, b""
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if take(self, data, time.perf_counter_ns()):
            self.send()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def main(url: str, model: str, streams: int, max_tokens: int, seconds: float, warmup_s: float) -> None:
    parts, request = request_for(url, model, max_tokens)
    stats = new_stats()
    t0 = time.perf_counter_ns()
    window = (t0 + int(warmup_s * 1e9), t0 + int((seconds - 1) * 1e9))
    loop = asyncio.get_running_loop()
    end = time.perf_counter() + seconds
    finished = []
    for _ in range(streams):
        done = loop.create_future()
        await loop.create_connection(lambda d=done: Stream(request, window, end, stats, d), parts.hostname, parts.port)
        finished.append(done)
    await asyncio.wait_for(asyncio.gather(*finished), seconds + 120)
    report(stats)


if __name__ == "__main__":
    url, model, streams, max_tokens, seconds, warmup = sys.argv[1:7]
    coro = main(url, model, int(streams), int(max_tokens), float(seconds), float(warmup))
    try:  # the floor: uvloop (libuv, C transports) when installed, as locust-llm's own simulator uses
        if sys.argv[7:] == ["asyncio"]:
            raise ImportError
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)
