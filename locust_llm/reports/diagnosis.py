"""Why the capacity is where it is: the wall, from one model's per-step rows and their analysis. Pure.

It reads the step the recommendation allows (``B``) and the first past it (``W``), each gauge as its median, and names
the first wall that fits: ``generator``, ``provider_cap``, then from a queue at ``W``: ``unbalanced_router``,
``kv_cache``, ``batch_limit``; without one ``batch_decode``; else ``unknown``; no wall where no limit was reached.
Confidence is high only for a bend between tested steps, ``MIN_SCRAPES`` scrapes at both, and each gauge past its
threshold by a margin. Each rule: docs/methodology.md, "The diagnosis".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from locust_llm.measure.evidence import server_queue
from locust_llm.measure.thresholds import CAP_SHARE, ITL_RISE, KV_FULL, MIN_SCRAPES, QUEUE, QUEUE_SHARE, UNBALANCED

__all__ = ["WALLS", "diagnose"]

WALLS = {
    "kv_cache": "KV-cache memory",
    "batch_limit": "the server's limit on running requests",
    "batch_decode": "decode slowing as the batch grows",
    "unbalanced_router": "a router that sends unevenly: one replica queues while others have room",
    "provider_cap": "the provider's rate limit (HTTP 429)",
    "generator": "the load generator, not the server",
    "unknown": "not sure",
}
FLAT = 0.10
"""A running count is flat between two steps when it moved by at most this share (or one request)."""


def _f(row: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if row is None else row.get(key)
    return None if value is None or value == "" else float(value)


def _load_of(row: Mapping[str, Any]) -> float:
    offered = _f(row, "offered_req_s")
    return offered if offered is not None else float(row["users"])


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


def _scraped(row: Mapping[str, Any] | None) -> bool:
    return (_f(row, "server_scrapes") or 0) >= MIN_SCRAPES


def diagnose(steps: Sequence[Mapping[str, Any]], analysis: Mapping[str, Any]) -> dict[str, Any]:
    """The wall (module docstring) of ``steps`` (one model's rows) whose analysis (``reports.analysis``, as a dict
    in either mode's names) says where the recommendation is and what bound it; ``wall``, ``evidence``,
    ``confidence`` and a ``sentence``."""
    rows = sorted((r for r in steps if r.get("requests")), key=_load_of)
    if not rows:
        return _result("unknown", ["no step completed a request"], "low")
    binding = analysis.get("binding", "none")
    allowed = next((analysis[k] for k in ("recommended_users", "recommended_rate_req_s") if k in analysis), None)
    if binding == "none":
        top = _load(rows[-1])
        return _result("unknown", [f"no limit reached up to {top}: no wall to name"], "low")
    below = [r for r in rows if allowed is not None and _load_of(r) <= allowed]
    before = below[-1] if below and allowed else None
    wall_row = next((r for r in rows if allowed is None or _load_of(r) > allowed), rows[-1])
    upto = [r for r in rows if _load_of(r) <= _load_of(wall_row)]
    knee_sure = binding != "latency_knee" or analysis.get("latency_knee_confidence") == "high"
    inside = before is not None and knee_sure  # the bend lies between two tested steps, and is not in doubt
    return _wall(before, wall_row, upto, inside)


def _wall(
    before: Mapping[str, Any] | None, wall_row: Mapping[str, Any], upto: list[Mapping[str, Any]], inside: bool
) -> dict[str, Any]:
    for row in upto:
        reasons = str(row.get("invalid_reasons") or "")
        if any(k in reasons for k in ("generator saturated", "scheduling lag", "loop stalled")):
            return _result("generator", [f"at {_load(row)}: {reasons}"], "high")
    for row in upto:
        requests = _f(row, "requests") or 0.0
        share = (_f(row, "status_429") or 0.0) / requests if requests else 0.0
        if share > CAP_SHARE:
            sure = "high" if share >= 2 * CAP_SHARE else "low"
            return _result("provider_cap", [f"HTTP 429 on {share:.1%} of requests at {_load(row)}"], sure)
        for what in ("requests", "tokens"):  # the provider's own headers: nothing of a cap left
            limit = _f(row, f"ratelimit_limit_{what}")
            if _f(row, f"ratelimit_remaining_{what}_min") == 0 and limit:
                evidence = [f"no {what} left of the provider's limit of {limit:g} at {_load(row)}"]
                return _result("provider_cap", evidence, "high")
    if not _f(wall_row, "server_scrapes"):
        return _result("unknown", ["no server metrics, and no HTTP 429 to go on"], "low")
    return _server_wall(before, wall_row, inside and _scraped(before) and _scraped(wall_row))


def _server_wall(before: Mapping[str, Any] | None, wall_row: Mapping[str, Any], sure: bool) -> dict[str, Any]:
    """The wall from the server's own gauges at ``wall_row`` (and ``before``, the step allowed), module docstring."""
    at, was = _load(wall_row), (_load(before) if before is not None else "the step below")
    kv, running, waiting = (
        _f(wall_row, k) for k in ("server_kv_usage_p50", "server_running_p50", "server_waiting_p50")
    )
    running_before, waiting_before = _f(before, "server_running_p50"), _f(before, "server_waiting_p50")
    preempted = (_f(wall_row, "server_preemptions") or 0) > (_f(before, "server_preemptions") or 0)
    itl, itl_before = _f(wall_row, "itl_p50_ms"), _f(before, "itl_p50_ms")
    itl_note = f"ITL p50 {100 * (itl / itl_before - 1):+.0f}%" if itl and itl_before else "ITL unknown"
    queue = server_queue(wall_row)
    if queue is not None:
        text = f"{waiting:g} requests waiting and {running or 0:g} running at {at} ({waiting_before or 0:g} at {was})"
        margin = (waiting or 0.0) >= 2 * max(QUEUE, QUEUE_SHARE * (running or 0.0))
        confidence = "high" if sure and margin else "low"
        unbalanced = _unbalanced(wall_row)
        if unbalanced:
            return _result("unbalanced_router", [text, unbalanced], confidence)
        if (kv is not None and kv >= KV_FULL) or preempted:
            evidence = [text, *([f"KV usage {kv:.2f}"] if kv is not None else []), _preemptions(wall_row, preempted)]
            return _result("kv_cache", [e for e in evidence if e], confidence)
        if kv is not None:
            return _result(
                "batch_limit", [text, f"KV usage only {kv:.2f}: the server caps its running requests"], confidence
            )
        if running is not None and running_before is not None and _flat(running_before, running):
            evidence = [
                text,
                f"the running count held at {running:g} from {was}: a limit on running requests, whose cause (slots or "
                "memory) the server's metrics do not say (no KV-cache usage)",
            ]
            return _result("batch_limit", evidence, confidence)
        return _result("unknown", [text, "no KV-cache usage, and the running count still moved"], "low")
    if preempted:
        return _result("kv_cache", [f"no queue at {at}", _preemptions(wall_row, True)], "low")
    grew = running is not None and running_before is not None and running > running_before
    if grew and itl and itl_before and itl >= (1 + ITL_RISE) * itl_before:
        evidence = [f"{running:g} requests running at {at} ({running_before:g} at {was})", f"no queue, {itl_note}"]
        margin = itl >= (1 + 2 * ITL_RISE) * itl_before
        return _result("batch_decode", evidence, "high" if sure and margin else "low")
    return _result("unknown", [f"no queue and no slower decode at {at}", itl_note], "low")


def _unbalanced(row: Mapping[str, Any]) -> str:
    """The evidence of a router that sends unevenly (module docstring), or ``""``."""
    replicas, busiest = _f(row, "server_replicas"), _f(row, "server_busiest_share_p50")
    if not replicas or replicas < 2 or busiest is None or busiest <= UNBALANCED:
        return ""
    kv, median = _f(row, "server_kv_usage_p50"), _f(row, "server_kv_usage_median_p50")
    if median is not None and median >= KV_FULL:
        return ""  # the median replica is full too: the fleet is
    room = (
        f"KV usage {kv:.2f} on the fullest replica, {median:.2f} on the median"
        if kv is not None and median is not None
        else "the others without a queue"
    )
    return (
        f"{busiest:.0%} of the waiting on one of {replicas:g} replicas ({room}): the router sends unevenly, "
        "the fleet is not full"
    )


def _flat(before: float, after: float) -> bool:
    return abs(after - before) <= max(1.0, FLAT * before)


def _preemptions(row: Mapping[str, Any], rising: bool) -> str:
    n = _f(row, "server_preemptions")
    return f"{n:g} preemptions in the window (the server evicting requests for KV room)" if rising and n else ""
