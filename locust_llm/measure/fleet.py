"""One round of scrapes over a server's replicas, read into a step's gauges. Pure.

Running and waiting are summed over the replicas; KV usage kept as the fullest and the median replica's; the busiest
replica's share of the waiting tells an uneven router from a full fleet (docs/methodology.md, "Several replicas").
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ServerScrape", "server_columns"]


@dataclass(frozen=True)
class ServerScrape:
    replicas: tuple[Mapping[str, float], ...]  # each answering replica's gauges
    preempted: int = 0  # the preemptions counted since the round before, over the replicas

    def histograms(self) -> dict[str, float]:
        """The round's values by histogram name (``measure.stats.HISTOGRAMS``); a gauge no replica gave is absent."""
        out: dict[str, float] = {"server_replicas": float(len(self.replicas))}
        for gauge, name in (("running", "server_running"), ("waiting", "server_waiting")):
            values = [r[gauge] for r in self.replicas if gauge in r]
            if values:
                out[name] = sum(values)
        kv = sorted(r["kv_usage"] for r in self.replicas if "kv_usage" in r)
        if kv:
            out["server_kv"], out["server_kv_median"] = kv[-1], statistics.median(kv)
        waiting = [r.get("waiting", 0.0) for r in self.replicas]
        if sum(waiting) > 0:
            out["server_busiest_share"] = max(waiting) / sum(waiting)
        return out


def server_columns(stats: Any) -> dict[str, Any]:
    """A step row's server columns from its statistics (``measure.stats.StepStats``) over the steady window: p50,
    max and min of each gauge over the rounds, the preemptions, the replicas, and the provider's stated caps."""
    out: dict[str, Any] = {k: stats.counts[k] for k in ("server_scrapes", "server_scrape_failures")}
    for gauge, name, digits in (
        ("kv_usage", "server_kv", 3),
        ("running", "server_running", 1),
        ("waiting", "server_waiting", 1),
    ):
        hist = stats.hist[name]
        out[f"server_{gauge}_p50"] = round(hist.quantile(0.5) / 1000, digits) if hist.count else None
        out[f"server_{gauge}_max"] = round(hist.max / 1000, digits) if hist.count else None
        out[f"server_{gauge}_min"] = round(hist.min / 1000, digits) if hist.count else None
    out["server_preemptions"] = stats.counts["server_preemptions"] if stats.counts["server_scrapes"] else None
    replicas, median, busiest = (stats.hist[n] for n in ("server_replicas", "server_kv_median", "server_busiest_share"))
    out["server_replicas"] = round(replicas.max / 1000) if replicas.count else None
    out["server_kv_usage_median_p50"] = round(median.quantile(0.5) / 1000, 3) if median.count else None
    out["server_busiest_share_p50"] = round(busiest.quantile(0.5) / 1000, 2) if busiest.count else None
    for what in ("requests", "tokens"):  # the provider's caps in the answers' heads: the largest seen, the least left
        limit, left = stats.hist[f"ratelimit_limit_{what}"], stats.hist[f"ratelimit_remaining_{what}"]
        out[f"ratelimit_limit_{what}"] = limit.max if limit.count else None
        out[f"ratelimit_remaining_{what}_min"] = left.min if left.count else None
    return out
