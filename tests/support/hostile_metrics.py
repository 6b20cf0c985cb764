"""A Prometheus endpoint that misbehaves on purpose: ``python -m tests.support.hostile_metrics``.

By path: ``/ok`` (two vLLM gauges), ``/hang`` (accepts, never answers), ``/drip`` (a head, then one byte a second),
``/garbage`` (200 with bytes that are no metrics), ``/huge`` (32 MiB of valid gauges, as fast as the reader takes
them), ``/flap`` (500 and 200 in turn). Prints ``listening on http://127.0.0.1:PORT`` when ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

OK = (
    b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    b"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.25\n"
)
HUGE_LINES = 700_000
HUGE = b"# TYPE filler gauge\n" + b"".join(
    b'filler{i="%07d",pad="xxxxxxxxxxxxxxxxxxxx"} 1\n' % i for i in range(HUGE_LINES)
)
FLAPS = [0]


def _head(status: str, length: int | None = None) -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nConnection: close\r\n{size}\r\n".encode()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1].decode()
        if path == "/hang":
            await asyncio.sleep(120)
        elif path == "/drip":
            writer.write(_head("200 OK", 1000))
            for _ in range(120):
                writer.write(b"#")
                await writer.drain()
                await asyncio.sleep(1.0)
        elif path == "/garbage":
            body = bytes(range(256)) * 64
            writer.write(_head("200 OK", len(body)) + body)
        elif path == "/huge":
            writer.write(_head("200 OK", len(HUGE)))
            for i in range(0, len(HUGE), 1 << 20):
                writer.write(HUGE[i : i + (1 << 20)])
                await writer.drain()
        elif path == "/flap":
            FLAPS[0] += 1
            writer.write(_head("500 Internal Server Error", 0) if FLAPS[0] % 2 else _head("200 OK", len(OK)) + OK)
        else:
            writer.write(_head("200 OK", len(OK)) + OK)
        await writer.drain()
    writer.close()


async def main() -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    sys.exit(0)
