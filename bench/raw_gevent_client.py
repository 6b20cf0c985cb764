"""The floor on gevent's loop: bench/raw_client.py's bare client, its reads in libev read callbacks.

``python bench/raw_gevent_client.py URL MODEL STREAMS MAX_TOKENS SECONDS WARMUP_S`` does what bench/raw_client.py
does (STREAMS closed-loop keep-alive connections, a token = an event holding a non-empty ``"content":"``, no HTTP
library, no JSON parsing) and prints the same JSON line, but on gevent's hub: each socket has a libev read watcher
whose callback reads and splits, as locust-llm's pump (``locust_llm/http/pump.py``) does. What it costs above
raw_client.py on uvloop is what gevent's loop costs per wake-up: the part of locust-llm's CPU per token that no
change inside locust-llm can remove while it runs in Locust's gevent process.
"""

from __future__ import annotations

import random
import sys
import time

import gevent
import gevent.socket
from gevent.event import Event
from raw_client import new_stats, report, request_for, take


class Stream:
    def __init__(self, host: str, port: int, request: bytes, window: tuple[int, int], end: float, stats: dict) -> None:
        self.sock = gevent.socket.create_connection((host, port))
        self.raw = self.sock._sock  # the non-blocking OS socket
        self.request, self.window, self.end, self.stats = request, window, end, stats
        self.buffer = b""
        self.sent = 0
        self.last: int | None = None
        self.done = Event()
        self.watcher = gevent.get_hub().loop.io(self.sock.fileno(), 1)
        self.watcher.start(self.readable)
        gevent.get_hub().loop.timer(random.random()).start(self.send)

    def send(self) -> None:
        if time.perf_counter() >= self.end:
            self.watcher.stop()
            self.sock.close()
            self.done.set()
            return
        self.sent, self.last, self.buffer = time.perf_counter_ns(), None, b""
        self.raw.sendall(self.request)  # small: the kernel takes it at once

    def readable(self) -> None:
        try:
            data = self.raw.recv(65536)
        except BlockingIOError:
            return
        now = time.perf_counter_ns()
        if not data:
            self.watcher.stop()
            self.done.set()
        elif take(self, data, now):
            self.send()


def main(url: str, model: str, streams: int, max_tokens: int, seconds: float, warmup_s: float) -> None:
    parts, request = request_for(url, model, max_tokens)
    stats = new_stats()
    t0 = time.perf_counter_ns()
    window = (t0 + int(warmup_s * 1e9), t0 + int((seconds - 1) * 1e9))
    end = time.perf_counter() + seconds
    all_streams = [Stream(parts.hostname or "", parts.port or 80, request, window, end, stats) for _ in range(streams)]
    gevent.wait([s.done for s in all_streams], timeout=seconds + 120)
    report(stats)


if __name__ == "__main__":
    url, model, streams, max_tokens, seconds, warmup = sys.argv[1:7]
    main(url, model, int(streams), int(max_tokens), float(seconds), float(warmup))
