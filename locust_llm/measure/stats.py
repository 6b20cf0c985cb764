"""Per-step statistics: histograms and counters keyed by (step, model, phase). Pure and mergeable.

Each measurement is filed at the moment it was observed: TTFT at the first token, TTFA at the first answer token,
each ITL gap at the later of its tokens, the scheduling lag at the send, and E2E, TPOT, the counters, the status
class and a conversation turn's record at the end. So a step's steady window holds exactly what was observed during
it, whichever step the request started in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from locust_llm.measure.fleet import ServerScrape
from locust_llm.measure.histogram import PRECISION, Histogram
from locust_llm.measure.timeline import STEADY, WARMUP
from locust_llm.protocol.metrics import RequestResult, StatusClass

__all__ = [
    "COUNTERS",
    "GENERATOR",
    "HISTOGRAMS",
    "STEADY",
    "TURN_HISTOGRAMS",
    "WARMUP",
    "StatsKey",
    "StatsTable",
    "StepStats",
    "TurnStats",
]

HISTOGRAMS = (
    "ttft",
    "ttft_lag",
    "itl",
    "e2e",
    "tpot",
    "lag",
    "client_ttft",
    "client_e2e",
    "in_flight",
    "answer_ttft",
    "server_kv",
    "server_running",
    "server_waiting",
    "server_kv_median",
    "server_replicas",
    "server_busiest_share",
    "ratelimit_limit_requests",
    "ratelimit_remaining_requests",
    "ratelimit_limit_tokens",
    "ratelimit_remaining_tokens",
    "loop_stall",
)
"""``ttft_lag`` is TTFT plus the scheduling lag: the TTFT a user would have seen had the generator kept up.
``client_ttft`` and ``client_e2e`` are the client-perceived latencies of a client request, from its intended
start to the first token / the end of its final attempt: its waits, retries and fallbacks included. ``in_flight``
(open loop) is the number of requests in flight at each arrival, times 1,000 (the histogram's unit); ``server_*``
each round of scrapes of the server's metrics (``measure.fleet``), times 1,000;
``ratelimit_*`` the provider's stated caps and what was left of them, from each answer's head; ``loop_stall`` how late
the generator's event loop ran, time-weighted (``runtime.stall``; filed under the model ``""``)."""

RATELIMIT_HISTOGRAMS = tuple(name for name in HISTOGRAMS if name.startswith("ratelimit_"))
"""In the order of ``locust_llm.protocol.metrics.RATELIMIT_HEADERS``."""
MAX_BLOCKS = 120
"""The most TTFT blocks of a step (one a second, then every 120th second together): a 2-minute step's seconds each
alone, and a night-long step's blocks bounded (docs/performance.md, Memory)."""
BLOCK_PRECISION = 7
"""The blocks' precision in bits (values within 0.8 %, far inside a bootstrap's spread). A block's buckets are at
most those of the step's TTFT histogram seen at 7 bits, about an eighth of its 10 bits' where values are dense: the
120 blocks stay near 15 times that histogram however long the step, not 120 times (docs/performance.md, Memory)."""
STALL_PRECISION = 7
"""The loop stalls' precision in bits: read only against a threshold, within 0.8 % is plenty, and their values span
six decades, over which 10-bit buckets kept filling for hours (docs/performance.md, Memory)."""
GENERATOR = ""
"""The statistics key's model for what belongs to the generator, not to a model: its loop's stalls."""

COUNTERS = (
    "requests",
    *(c.value for c in StatusClass),
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "reasoning_tokens",
    "tool_calls",  # tool calls the answers made (each one's start), and the argument deltas they streamed
    "tool_call_tokens",
    "output_tokens_asked",  # of successful requests that said what they asked for: max_tokens, and what they got
    "output_tokens_got",
    "estimated_token_requests",
    "no_done",
    "interrupted",
    # client discipline (see locust_llm.users.flow)
    "client_requests",
    "client_ok",
    "client_429",
    "client_good",
    "retries",
    "retry_wait_ms",
    "retry_waits_capped",
    "fallbacks",
    "reconnects",
    "hedges",
    "hedge_wins",
    "error_backoffs",
    "error_backoff_ms",
    # routes (see locust_llm.config.routes): client requests a route served, its cool-downs, and the tokens of
    # attempts it took as a fallback or hedge of another route's client request (the extra cost)
    "served",
    "route_cooldowns",
    "secondary_prompt_tokens",
    "secondary_completion_tokens",
    "secondary_cached_tokens",
    # open loop (see locust_llm.users.open_loop): arrivals (a session's every turn), sessions begun, turns ended
    "arrivals",
    "dropped",
    "sessions",
    "turns",
    # the server's metrics (see locust_llm.runtime.server_scraper)
    "server_scrapes",
    "server_scrape_failures",
    "server_preemptions",
)


@dataclass(frozen=True, order=True)
class StatsKey:
    step: int
    model: str
    phase: str  # steady, warmup or drain (see collect.timeline)


TURN_HISTOGRAMS = ("ttft", "e2e", "prompt_tokens", "cached_prompt_tokens")
"""Per turn index: TTFT and E2E (ns) of its successful requests, their prompt and cached prompt tokens (unit 1)."""


@dataclass
class TurnStats:
    """One turn index of the conversations of a (step, model, phase): successful requests only."""

    hist: dict[str, Histogram] = field(
        default_factory=lambda: {name: Histogram(1 if name.endswith("tokens") else 1000) for name in TURN_HISTOGRAMS}
    )
    requests: int = 0

    def add(self, result: RequestResult) -> None:
        self.requests += 1
        hist = self.hist
        hist["e2e"].record(result.e2e_ns)
        hist["prompt_tokens"].record(result.prompt_tokens)
        hist["cached_prompt_tokens"].record(result.cached_tokens)
        if result.token_ns:
            hist["ttft"].record(result.token_ns[0] - result.sent_ns)

    def merge(self, other: TurnStats) -> None:
        self.requests += other.requests
        for name, h in other.hist.items():
            self.hist[name].merge(h)

    def to_wire(self) -> dict[str, Any]:
        return {"n": self.requests, "h": {name: h.to_wire() for name, h in self.hist.items() if h.count}}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> TurnStats:
        stats = cls(requests=int(wire["n"]))
        for name, h in wire.get("h", {}).items():
            if name in stats.hist:
                stats.hist[name] = Histogram.from_wire(h)
        return stats


@dataclass
class StepStats:
    hist: dict[str, Histogram] = field(
        default_factory=lambda: {
            name: Histogram(precision=STALL_PRECISION if name == "loop_stall" else PRECISION) for name in HISTOGRAMS
        }
    )
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    turns: dict[int, TurnStats] = field(default_factory=dict)
    blocks: dict[int, Histogram] = field(default_factory=dict)
    """TTFT again, by the second (of the recording process's clock) it was observed in: the blocks the knee's
    bootstrap resamples (``measure.knee.knee_resamples``), so that a second's burst stays together. Seconds
    :data:`MAX_BLOCKS` apart share a block, so a long step's memory stays bounded."""

    @property
    def empty(self) -> bool:
        """No request and no latency: nothing to make a row of (the generator's loop stalls alone make none)."""
        return self.counts["requests"] == 0 and all(h.count == 0 for n, h in self.hist.items() if n != "loop_stall")

    @property
    def blank(self) -> bool:
        """Nothing at all, not even a counter (an attempt cut by the stop, a retry wait) or a loop stall: nothing to
        ship."""
        return not any(self.counts.values()) and all(h.count == 0 for h in self.hist.values())

    def merge(self, other: StepStats) -> StepStats:
        for name, hist in other.hist.items():
            self.hist[name].merge(hist)
        for name, n in other.counts.items():
            self.counts[name] = self.counts.get(name, 0) + n
        for turn, stats in other.turns.items():
            self.turn(turn).merge(stats)
        for second, hist in other.blocks.items():
            self.block(second).merge(hist)
        return self

    def block(self, second: int) -> Histogram:
        hist = self.blocks.get(second)
        if hist is None:
            hist = self.blocks[second] = Histogram(precision=BLOCK_PRECISION)
        return hist

    def turn(self, turn: int) -> TurnStats:
        stats = self.turns.get(turn)
        if stats is None:
            stats = self.turns[turn] = TurnStats()
        return stats

    def to_wire(self) -> dict[str, Any]:
        wire = {
            "h": {name: h.to_wire() for name, h in self.hist.items() if h.count},
            "c": {name: n for name, n in self.counts.items() if n},
        }
        if self.turns:
            wire["t"] = [[turn, stats.to_wire()] for turn, stats in sorted(self.turns.items())]
        if self.blocks:
            wire["b"] = [[second, hist.to_wire()] for second, hist in sorted(self.blocks.items())]
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> StepStats:
        stats = cls()
        for name, h in wire.get("h", {}).items():
            if name in stats.hist:
                stats.hist[name] = Histogram.from_wire(h)
        for name, n in wire.get("c", {}).items():
            stats.counts[name] = int(n)
        for turn, t in wire.get("t", []):
            stats.turns[int(turn)] = TurnStats.from_wire(t)
        for second, hist in wire.get("b", []):
            stats.blocks[int(second)] = Histogram.from_wire(hist)
        return stats


Locate = Callable[[int], tuple[int, str]]

Runs = dict[int, tuple[Histogram, list[list[int]]]]
"""ITL histograms (by ``id``) and the token times whose gaps are still to be recorded in each."""


class StatsTable:
    """All :class:`StepStats` of a process (or, on the master, of the whole run), keyed by :class:`StatsKey`."""

    def __init__(self) -> None:
        self._stats: dict[StatsKey, StepStats] = {}
        self._by_tuple: dict[tuple[int, str, str], StepStats] = {}
        """The same stats by a plain tuple key, for :meth:`_at` (a tuple is made and hashed faster than a key)."""

    def __iter__(self) -> Iterator[tuple[StatsKey, StepStats]]:
        return iter(sorted(self._stats.items()))

    def __len__(self) -> int:
        return len(self._stats)

    def get(self, key: StatsKey) -> StepStats:
        stats = self._stats.get(key)
        if stats is None:
            stats = self._stats[key] = StepStats()
        return stats

    def _at(self, locate: Locate, model: str, t_ns: int) -> StepStats:
        step, phase = locate(t_ns)
        stats = self._by_tuple.get((step, model, phase))
        if stats is None:
            stats = self._by_tuple[step, model, phase] = self.get(StatsKey(step, model, phase))
        return stats

    def add_all(self, results: list[RequestResult], locate: Locate) -> None:
        """:meth:`add` each of ``results``; the usual ITL gaps (all of a request's in one step and phase) are recorded
        together per histogram (:meth:`~locust_llm.measure.histogram.Histogram.record_gap_runs`), the same samples."""
        runs: Runs = {}
        for result in results:
            self.add(result, locate, runs)
        for hist, lists in runs.values():
            hist.record_gap_runs(lists)

    def add(self, result: RequestResult, locate: Locate, runs: Runs | None = None) -> None:
        """File every measurement of ``result`` under the step it was observed in (see module docstring); with
        ``runs``, its usual ITL gaps are left there for the caller to record (:meth:`add_all`)."""
        model = result.model
        self._at(locate, model, result.sent_ns).hist["lag"].record(result.lag_ns)
        tokens = result.token_ns
        if tokens:
            first = self._at(locate, model, tokens[0])
            ttft = tokens[0] - result.sent_ns
            first.hist["ttft"].record(ttft)
            first.block(tokens[0] // 1_000_000_000 % MAX_BLOCKS).record(ttft)
            first.hist["ttft_lag"].record(ttft + result.lag_ns)
            if result.answer_ns:
                answer = first if result.answer_ns == tokens[0] else self._at(locate, model, result.answer_ns)
                answer.hist["answer_ttft"].record(result.answer_ns - result.sent_ns)
            self._add_gaps(tokens, locate, model, runs)
        end = self._at(locate, model, result.end_ns)
        counts = end.counts
        counts["requests"] += 1
        counts[result.outcome.status_class.value] += 1
        counts["prompt_tokens"] += result.prompt_tokens
        counts["completion_tokens"] += result.completion_tokens
        counts["cached_prompt_tokens"] += result.cached_tokens
        counts["reasoning_tokens"] += result.reasoning_tokens
        if result.tool_calls:
            counts["tool_calls"] += result.tool_calls
            counts["tool_call_tokens"] += result.tool_call_chunks
        if result.tokens_estimated or result.reasoning_estimated:
            counts["estimated_token_requests"] += 1
        if result.no_done:
            counts["no_done"] += 1
        if result.secondary:
            counts["secondary_prompt_tokens"] += result.prompt_tokens
            counts["secondary_completion_tokens"] += result.completion_tokens
            counts["secondary_cached_tokens"] += result.cached_tokens
        if result.ratelimit is not None:
            for name, value in zip(RATELIMIT_HISTOGRAMS, result.ratelimit, strict=True):
                if value is not None:
                    end.hist[name].record(max(0, value))
        if result.ok:
            if result.max_tokens:
                counts["output_tokens_asked"] += result.max_tokens
                counts["output_tokens_got"] += result.completion_tokens
            if result.turn:
                end.turn(result.turn).add(result)
            end.hist["e2e"].record(result.e2e_ns)
            tpot = result.tpot_ns
            if tpot is not None:
                end.hist["tpot"].record(tpot)

    def add_stall(self, lateness_ns: int, t_ns: int, locate: Locate) -> None:
        """How late the generator's loop ran at ``t_ns`` (``runtime.stall``), under the :data:`GENERATOR` key."""
        self._at(locate, GENERATOR, t_ns).hist["loop_stall"].record(lateness_ns)

    def bump(self, name: str, model: str, n: int, t_ns: int, locate: Locate) -> None:
        """Add ``n`` to counter ``name`` of ``model`` at the step observed at ``t_ns``."""
        self._at(locate, model, t_ns).counts[name] += n

    def add_arrival(self, model: str, in_flight: int, dropped: bool, t_ns: int, locate: Locate) -> None:
        """An open-loop arrival at ``t_ns`` finding ``in_flight`` requests in flight; ``dropped`` at the cap."""
        stats = self._at(locate, model, t_ns)
        stats.counts["arrivals"] += 1
        stats.counts["dropped"] += dropped
        stats.hist["in_flight"].record(in_flight * 1000)

    def add_server(self, model: str, scrape: ServerScrape, t_ns: int, locate: Locate) -> None:
        """A round of scrapes of the server's metrics at ``t_ns`` (``locust_llm.measure.fleet``)."""
        stats = self._at(locate, model, t_ns)
        stats.counts["server_scrapes"] += 1
        stats.counts["server_preemptions"] += scrape.preempted
        for name, value in scrape.histograms().items():
            stats.hist[name].record(max(0, round(value * 1000)))

    def add_client(
        self, model: str, intended_ns: int, final: RequestResult, locate: Locate, good: bool = False
    ) -> None:
        """A client request that began at ``intended_ns`` and ended with attempt ``final``: its client-perceived
        TTFT and E2E, filed at its end (with ``model``, the primary); ``good``: it met the SLA."""
        stats = self._at(locate, model, final.end_ns)
        stats.counts["client_requests"] += 1
        if final.ok:
            served = stats if final.model == model else self._at(locate, final.model, final.end_ns)
            served.counts["served"] += 1
            stats.counts["client_ok"] += 1
            stats.counts["client_good"] += good
            stats.hist["client_ttft"].record(max(0, final.token_ns[0] - intended_ns))
            stats.hist["client_e2e"].record(max(0, final.end_ns - intended_ns))
        elif final.status == 429:  # refused in the end (after any retries and fallbacks): the provider cap's share
            stats.counts["client_429"] += 1

    def _add_gaps(self, tokens: list[int], locate: Locate, model: str, runs: Runs | None) -> None:
        if len(tokens) < 2:
            return
        if locate(tokens[1]) == locate(tokens[-1]):  # the usual case: all gaps in one step and phase
            hist = self._at(locate, model, tokens[-1]).hist["itl"]
            if runs is None:
                hist.record_gaps(tokens)
            elif id(hist) in runs:
                runs[id(hist)][1].append(tokens)
            else:
                runs[id(hist)] = (hist, [tokens])
            return
        for i in range(1, len(tokens)):
            self._at(locate, model, tokens[i]).hist["itl"].record(tokens[i] - tokens[i - 1])

    def merge(self, other: StatsTable, steps: Collection[int] | None = None) -> StatsTable:
        """Add ``other``'s statistics (only those of ``steps`` when given) to this table's."""
        for key, stats in other._stats.items():
            if steps is None or key.step in steps:
                self.get(key).merge(stats)
        return self

    def drain(self) -> StatsTable:
        """Return everything recorded so far and start afresh (worker deltas)."""
        out = StatsTable()
        out._stats, self._stats = self._stats, {}
        out._by_tuple, self._by_tuple = self._by_tuple, {}
        return out

    def to_wire(self) -> list[Any]:
        return [[k.step, k.model, k.phase, s.to_wire()] for k, s in sorted(self._stats.items()) if not s.blank]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> StatsTable:
        table = cls()
        try:
            for step, model, phase, stats in wire:
                table.get(StatsKey(int(step), str(model), str(phase))).merge(StepStats.from_wire(stats))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed per-step statistics from a worker: {exc!r}") from exc
        return table
