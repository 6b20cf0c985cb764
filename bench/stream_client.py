"""A plain asyncio streaming client for benchmarks: N keep-alive connections, closed loop, bounded in time.

``python bench/stream_client.py URL MODEL STREAMS MAX_TOKENS SECONDS`` prints one JSON line:
``{"tokens": ..., "requests": ..., "seconds": ...}``. It counts content chunks with ``bytes.count`` on large reads,
so it stays cheap at tens of thousands of tokens per second.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit

MARK = b'{"content":'
DONE = b"data: [DONE]"


async def stream_loop(host: str, port: int, path: str, body: bytes, deadline: float, counts: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer bench\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        while time.monotonic() < deadline:
            writer.write(head + body)
            tail = b""
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                buf = tail + data
                counts["tokens"] += buf.count(MARK) - tail.count(MARK)
                if DONE in buf:
                    counts["requests"] += 1
                    break
                tail = buf[-16:]
            if not buf.endswith(b"0\r\n\r\n"):
                await reader.readuntil(b"0\r\n\r\n")
    finally:
        writer.close()


async def main(url: str, model: str, streams: int, max_tokens: int, seconds: float) -> None:
    parts = urlsplit(url)
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "bench"}], "max_tokens": max_tokens, "stream": True}
    ).encode()
    counts = {"tokens": 0, "requests": 0}
    start = time.monotonic()
    deadline = start + seconds
    tasks = [
        stream_loop(parts.hostname, parts.port, parts.path + "/chat/completions", body, deadline, counts)
        for _ in range(streams)
    ]
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), seconds + 60)
    counts_out = {**counts, "seconds": round(time.monotonic() - start, 3)}
    print(json.dumps(counts_out), flush=True)


if __name__ == "__main__":
    url, model, streams, max_tokens, seconds = sys.argv[1:6]
    asyncio.run(main(url, model, int(streams), int(max_tokens), float(seconds)))
