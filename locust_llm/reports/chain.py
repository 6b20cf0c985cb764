"""What a fallback/hedge chain across routes did, per step, from the per-route rows (``--routes``). Pure.

Each route's share of the client requests served, the primary's client figures, and the chain's extra cost.
docs/methodology.md, "Routes", has each formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from locust_llm.measure.rows import series

__all__ = ["chain_text", "route_prices", "routes_summary", "routes_text"]


def route_prices(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Each route's own prices as recorded in a run's settings (name -> the prices' dict), where a route had them."""
    routes = (settings.get("routes") or {}).get("routes") or []
    return {r["name"]: r["prices"] for r in routes if r.get("prices")}


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def routes_summary(steps: Sequence[Mapping[str, Any]], routes: Mapping[str, Any], primary: str) -> dict[str, Any]:
    """Per step (module docstring), in step order; ``routes`` is the run's ``settings.routes``."""
    names = [r["name"] for r in routes.get("routes", [])]
    out = []
    for step in sorted({s["step"] for s in steps}):
        rows = {series(s): s for s in steps if s["step"] == step}
        served = {name: int(rows[name].get("served") or 0) if name in rows else 0 for name in names}
        total = sum(served.values())
        costs = [(r.get("cost_usd"), r.get("extra_cost_usd")) for r in rows.values()]
        priced = [(float(c), float(e or 0.0)) for c, e in costs if c is not None]
        extra = sum(e for _, e in priced)
        base = sum(c for c, _ in priced) - extra
        head = rows.get(primary) or {}
        clients = int(head.get("client_requests") or 0)
        out.append(
            {
                "step": step,
                "users": next(iter(rows.values()))["users"],
                "served": served,
                "served_share": {name: _share(n, total) for name, n in served.items()},
                "client_requests": clients,
                "client_ok_share": _share(int(head.get("client_ok") or 0), clients),
                "client_ttft_p99_ms": head.get("client_ttft_p99_ms"),
                "client_e2e_p99_ms": head.get("client_e2e_p99_ms"),
                "extra_cost_usd": round(extra, 6) if priced else None,
                "extra_cost_share": _share(extra, base) if priced else None,
                "status_429_share": {
                    name: _share(int(rows[name].get("status_429") or 0), int(rows[name].get("requests") or 0))
                    for name in names
                    if name in rows
                },
            }
        )
    return {"primary": primary, "routes": names, "steps": out}


def _seconds(ms: Any) -> str:
    return "-" if ms is None else f"{float(ms) / 1000:.2f} s" if float(ms) >= 1000 else f"{float(ms):.0f} ms"


def _top(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The step of the largest load with client requests: where a chain is tested hardest."""
    steps = [s for s in summary["steps"] if s["client_requests"]]
    return max(steps, key=lambda s: (s["users"], s["step"])) if steps else None


def routes_text(summary: Mapping[str, Any], alone_ttft_p99_ms: float | None = None) -> str | None:
    """The printed line, e.g. ``with fallback, client TTFT p99 at 64 users 1.90 s (primary alone: 7.40 s); 31%
    served by vllm-local; +12% cost``; None when no step had a client request."""
    top = _top(summary)
    if top is None:
        return None
    alone = "" if alone_ttft_p99_ms is None else f" (primary alone: {_seconds(alone_ttft_p99_ms)})"
    parts = [f"with fallback, client TTFT p99 at {top['users']} users {_seconds(top['client_ttft_p99_ms'])}{alone}"]
    for name, share in top["served_share"].items():
        if name != summary["primary"] and share:
            parts.append(f"{share:.0%} served by {name}")
    if top["extra_cost_share"] is not None:
        parts.append(f"{top['extra_cost_share']:+.0%} cost")
    return "; ".join(parts)


def chain_text(alone: Mapping[str, Any], chain: Mapping[str, Any]) -> list[str]:
    """Lines comparing a run of the primary alone (a summary without routes) with a run of the chain (with), step
    by step at the loads both ran: the client TTFT p99 and success share of each, and the chain's line."""
    routes = chain.get("routes")
    if not routes:
        return []
    mine = {s["users"]: s for s in routes["steps"]}
    lines = []
    top_alone = None
    top = _top(routes)
    for row in sorted((s for s in alone["steps"] if series(s) == alone["model"]), key=lambda s: s["users"]):
        step = mine.get(row["users"])
        if step is None or row.get("client_ttft_p99_ms") is None:
            continue
        clients = int(row.get("client_requests") or 0)
        ok = _share(int(row.get("client_ok") or 0), clients)
        lines.append(
            f"  {row['users']} users: client TTFT p99 {_seconds(step['client_ttft_p99_ms'])} with the chain, "
            f"{_seconds(row['client_ttft_p99_ms'])} alone; served {_pct(step['client_ok_share'])} vs {_pct(ok)}"
        )
        if top is not None and row["users"] == top["users"]:
            top_alone = row["client_ttft_p99_ms"]
    head = routes_text(routes, top_alone)
    return ([head] if head else []) + lines


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"
