"""The reference generator: a minimal asyncio + aiohttp streaming client timing TTFT and every ITL gap.

``python bench/aiohttp_client.py URL MODEL STREAMS MAX_TOKENS SECONDS WARMUP_S [CA_FILE]`` runs STREAMS
closed-loop users (first requests spread over one second; over HTTPS trusting CA_FILE when given) and prints one
JSON line with TTFT/ITL p50/p99 (ms) of the samples observed between WARMUP_S and SECONDS - 1, and the number of
tokens received in that window.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import sys
import time

import aiohttp

from locust_llm.measure.histogram import Histogram


async def user(http, url, body, start, end, window, ttft, itl, counts):
    await asyncio.sleep(random.random())
    while time.perf_counter() < end:
        sent = time.perf_counter_ns()
        last = None
        async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
            async for line in resp.content:
                if not line.startswith(b"data: {"):
                    continue
                if b'"content":"' not in line or b'"content":""' in line:
                    continue
                now = time.perf_counter_ns()
                inside = window[0] <= now <= window[1]
                if last is None:
                    if inside:
                        ttft.record(now - sent)
                elif inside:
                    itl.record(now - last)
                if inside:
                    counts["tokens"] += 1
                last = now


async def main(url, model, streams, max_tokens, seconds, warmup_s, ca_file=None):
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "bench"}], "max_tokens": max_tokens, "stream": True}
    ).encode()
    ttft, itl, counts = Histogram(), Histogram(), {"tokens": 0}
    start = time.perf_counter()
    t0 = time.perf_counter_ns()
    window = (t0 + int(warmup_s * 1e9), t0 + int((seconds - 1) * 1e9))
    connector = aiohttp.TCPConnector(limit=0, ssl=ssl.create_default_context(cafile=ca_file) if ca_file else True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        tasks = [
            user(http, url + "/chat/completions", body, start, start + seconds, window, ttft, itl, counts)
            for _ in range(streams)
        ]
        await asyncio.gather(*tasks)
    q = lambda h, p: round(h.quantile(p) / 1e6, 3)  # noqa: E731
    print(
        json.dumps(
            {
                "ttft_p50_ms": q(ttft, 0.5),
                "ttft_p99_ms": q(ttft, 0.99),
                "itl_p50_ms": q(itl, 0.5),
                "itl_p99_ms": q(itl, 0.99),
                "tokens": counts["tokens"],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    url, model, streams, max_tokens, seconds, warmup = sys.argv[1:7]
    ca = sys.argv[7] if len(sys.argv) > 7 else None
    asyncio.run(main(url, model, int(streams), int(max_tokens), float(seconds), float(warmup), ca))
