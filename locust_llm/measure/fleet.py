"""One round of scrapes over a server's replicas, read into a step's gauges. Pure.

Running and waiting are summed over the replicas; KV usage kept as the fullest and the median replica's; the busiest
replica's share of the waiting tells an uneven router from a full fleet (docs/methodology.md, "Several replicas").
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ServerScrape"]


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
