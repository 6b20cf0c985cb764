"""Why the knee is where it is: the wall, from one model's per-step rows. Pure.

It compares the knee step (else the recommendation's) with the next: ``generator`` if a step was invalid for the
generator, ``provider_cap`` past ``CAP_SHARE`` of 429s or nothing left of a stated cap, then from the server's
metrics ``kv_cache`` (KV usage at ``KV_FULL``, a growing queue), ``batch_limit`` (a queue, KV below ``KV_FULL``) or
``batch_decode`` (no queue, more running, ITL up ``ITL_RISE``); else ``unknown``. docs/methodology.md, "The diagnosis".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from locust_llm.measure.thresholds import CAP_SHARE, ITL_RISE, KV_FULL, QUEUE, QUEUE_SHARE

__all__ = ["WALLS", "diagnose"]

WALLS = {
    "kv_cache": "KV-cache memory",
    "batch_limit": "the server's limit on running requests",
    "batch_decode": "decode slowing as the batch grows",
    "provider_cap": "the provider's rate limit (HTTP 429)",
    "generator": "the load generator, not the server",
    "unknown": "not sure",
}


def _f(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    return None if value is None or value == "" else float(value)


def _load(row: Mapping[str, Any]) -> str:
    offered = _f(row, "offered_req_s")
    return f"{offered:g} req/s" if offered is not None else f"{int(row['users'])} users"


def _result(wall: str, evidence: list[str], confidence: str) -> dict[str, Any]:
    sentence = f"the wall is {WALLS[wall]}" if wall != "unknown" else "not sure what the wall is"
    return {
        "wall": wall,
        "evidence": evidence,
        "confidence": confidence,
        "sentence": sentence + (": " + "; ".join(evidence) if evidence else ""),
    }


def diagnose(steps: Sequence[Mapping[str, Any]], knee_load: float | None) -> dict[str, Any]:
    """The wall (module docstring) of ``steps`` (one model's rows in increasing load), whose knee is at
    ``knee_load`` (users, or req/s in open loop); ``wall``, ``evidence``, ``confidence`` and a ``sentence``."""
    rows = sorted(steps, key=lambda r: _f(r, "offered_req_s") or float(r["users"]))
    if len(rows) < 2:
        return _result("unknown", ["fewer than two steps"], "low")
    load = [_f(r, "offered_req_s") or float(r["users"]) for r in rows]
    b = max((i for i, x in enumerate(load) if knee_load is not None and x <= knee_load), default=None)
    inside = b is not None and b + 1 < len(rows)
    if b is None or not inside:
        b = len(rows) - 2  # no bend inside the sweep: its last two steps, and what they show is low confidence
    before, wall_row = rows[b], rows[b + 1]
    upto = rows[: b + 2]
    for row in upto:
        reasons = str(row.get("invalid_reasons") or "")
        if "generator saturated" in reasons or "scheduling lag" in reasons:
            return _result("generator", [f"at {_load(row)}: {reasons}"], "high")
    for row in upto:
        requests = _f(row, "requests") or 0.0
        share = (_f(row, "status_429") or 0.0) / requests if requests else 0.0
        if share > CAP_SHARE:
            return _result("provider_cap", [f"HTTP 429 on {share:.1%} of requests at {_load(row)}"], "high")
        for what in ("requests", "tokens"):  # the provider's own headers: nothing of a cap left
            limit = _f(row, f"ratelimit_limit_{what}")
            if _f(row, f"ratelimit_remaining_{what}_min") == 0 and limit:
                evidence = [f"no {what} left of the provider's limit of {limit:g} at {_load(row)}"]
                return _result("provider_cap", evidence, "high")
    if not _f(wall_row, "server_scrapes"):
        return _result("unknown", ["no server metrics, and no HTTP 429 to go on"], "low")
    kv, waiting, running = (
        _f(wall_row, k) for k in ("server_kv_usage_max", "server_waiting_p50", "server_running_p50")
    )
    waiting_before = _f(before, "server_waiting_p50")
    running_before = _f(before, "server_running_p50")
    itl, itl_before = _f(wall_row, "itl_p50_ms"), _f(before, "itl_p50_ms")
    itl_note = f"ITL p50 {100 * (itl / itl_before - 1):+.0f}%" if itl and itl_before else "ITL unknown"
    queue = f"{waiting:g} requests waiting at {_load(wall_row)} ({waiting_before or 0:g} at {_load(before)})"
    confidence = "high" if inside and _f(before, "server_scrapes") else "low"
    queued = waiting is not None and waiting > max(QUEUE, QUEUE_SHARE * (running or 0.0))
    if queued and waiting is not None and waiting > (waiting_before or 0.0):
        if kv is not None and kv >= KV_FULL:
            return _result("kv_cache", [f"KV usage {kv:.2f} and {queue}", itl_note], confidence)
        if kv is not None:
            running_max = _f(wall_row, "server_running_max")
            evidence = [f"{queue} while KV usage stayed at {kv:.2f}", f"at most {running_max:g} running"]
            return _result("batch_limit", evidence, confidence)
        return _result("unknown", [queue, "no KV-cache usage to tell memory from a batch limit"], "low")
    grew = running is not None and running_before is not None and running > running_before
    if grew and itl and itl_before and itl >= (1 + ITL_RISE) * itl_before:
        evidence = [f"{running:g} requests running at {_load(wall_row)} ({running_before:g} at {_load(before)})"]
        return _result("batch_decode", [*evidence, f"no queue, {itl_note}"], confidence)
    return _result("unknown", [f"no queue and no slower decode at {_load(wall_row)}", itl_note], "low")
