"""The open-loop reference generator: a minimal asyncio + aiohttp client sending Poisson arrivals on schedule.

``python bench/aiohttp_open_loop.py URL MODEL RATE MAX_TOKENS SECONDS WARMUP_S`` sends requests at RATE per second
(exponential gaps, seeded) for SECONDS, each at its scheduled time in its own task, and prints one JSON line with
TTFT (from the scheduled time) and ITL p50/p99 (ms), the arrival error (sent - scheduled) p99, and the tokens
received, all over the samples observed between WARMUP_S and SECONDS - 1.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time

import aiohttp

from locust_llm.measure.histogram import Histogram


async def one(http, url, body, scheduled, window, hists, counts):
    sent = time.perf_counter_ns()
    if window[0] <= sent <= window[1]:
        hists["arrival"].record(max(0, sent - scheduled))
    last = None
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        async for line in resp.content:
            if not line.startswith(b"data: {") or b'"content":"' not in line or b'"content":""' in line:
                continue
            now = time.perf_counter_ns()
            inside = window[0] <= now <= window[1]
            if last is None:
                if inside:
                    hists["ttft"].record(now - scheduled)
            elif inside:
                hists["itl"].record(now - last)
            if inside:
                counts["tokens"] += 1
            last = now


async def main(url, model, rate, max_tokens, seconds, warmup_s):
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "bench"}], "max_tokens": max_tokens, "stream": True}
    ).encode()
    hists = {"ttft": Histogram(), "itl": Histogram(), "arrival": Histogram()}
    counts = {"tokens": 0}
    t0 = time.perf_counter_ns()
    window = (t0 + int(warmup_s * 1e9), t0 + int((seconds - 1) * 1e9))
    rng = random.Random(1)
    tasks = set()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        at = t0
        while at < t0 + int(seconds * 1e9):
            at += int(rng.expovariate(rate) * 1e9)
            delay = (at - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(http, url + "/chat/completions", body, at, window, hists, counts))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    q = lambda h, p: round(h.quantile(p) / 1e6, 3)  # noqa: E731
    result = {
        "ttft_p50_ms": q(hists["ttft"], 0.5),
        "ttft_p99_ms": q(hists["ttft"], 0.99),
        "itl_p50_ms": q(hists["itl"], 0.5),
        "itl_p99_ms": q(hists["itl"], 0.99),
        "arrival_err_p99_ms": q(hists["arrival"], 0.99),
        "tokens": counts["tokens"],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    url, model, rate, max_tokens, seconds, warmup = sys.argv[1:7]
    asyncio.run(main(url, model, float(rate), int(max_tokens), float(seconds), float(warmup)))
