"""Reference for the simulator benchmark: the naive design, one coroutine with its own timer per stream.

``python bench/ref_server.py ITL_MS [--realtime]`` serves ``/v1/chat/completions`` (streaming only) and ``/stats``
on a free port (under SCHED_FIFO with ``--realtime``, as the simulator's own flag); each stream sleeps until token
i's scheduled time ``start + i * ITL`` (no drift) and writes it. ``/stats`` reports the emission lateness (ms) since
the last ``/reset``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'
FRAME = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
DONE = b"data: [DONE]\n\n"
END = b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE), DONE)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
LATE: list[int] = []


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, itl_ns: int) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            body = await reader.readexactly(length)
            if head.startswith(b"GET /stats") or head.startswith(b"POST /reset"):
                if head.startswith(b"POST"):
                    LATE.clear()
                late = sorted(LATE) or [0]
                stats = json.dumps(
                    {
                        "count": len(LATE),
                        "p50": late[len(late) // 2] / 1e6,
                        "p99": late[int(0.99 * (len(late) - 1))] / 1e6,
                        "max": late[-1] / 1e6,
                    }
                ).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(stats), stats))
                continue
            n = json.loads(body)["max_tokens"]
            writer.write(HEAD)
            start = time.monotonic_ns()
            for i in range(n):
                due = start + (i + 1) * itl_ns
                delay = (due - time.monotonic_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                writer.write(FRAME)
                LATE.append(max(0, time.monotonic_ns() - due))
            writer.write(END)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(itl_ms: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, int(itl_ms * 1e6)), "127.0.0.1", 0, backlog=4096)
    print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if "--realtime" in sys.argv[2:]:  # as the simulator's own flag (locust_llm/sim/realtime.py)
        from locust_llm.sim.realtime import request

        request()
    asyncio.run(main(float(sys.argv[1])))
