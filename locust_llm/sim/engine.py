"""Engine models of an LLM server: which token of which sequence is emitted when. Pure; no I/O, no clock.

Every engine answers ``submit``, ``cancel``, ``next_event_ns`` and ``advance(now_ns)`` (every token due by then, in
time order). Scheduled times are the ground truth: they depend on the arrivals and the parameters only, never on how
late ``advance`` is called. :class:`PacingEngine` gives a fixed TTFT and ITL up to a capacity.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

__all__ = ["Emission", "Engine", "PacingEngine", "PacingParams", "SeqRequest"]

NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class SeqRequest:
    """One generation request: ``output_tokens`` tokens will be generated after a prompt of ``prompt_tokens``.

    ``prefix_key`` names the shareable cached leading part of the prompt (``prefix_tokens`` long: a system prompt or
    a ``cache_control``-marked prefix), if any; ``lookups`` are the prefixes a prefix cache may already hold,
    longest first, as ``(key, tokens)`` (a conversation's earlier turns among them; the shareable prefix when
    empty).
    """

    seq_id: int
    prompt_tokens: int
    output_tokens: int
    prefix_key: str | None = None
    prefix_tokens: int = 0
    lookups: tuple[tuple[str, int], ...] = ()
    inserts: tuple[tuple[str, int], ...] = ()  # once prefilled, every prefix enters the cache (its own tokens each)


class Emission(NamedTuple):
    """Token number ``token`` (0-based) of sequence ``seq_id``, scheduled at ``at_ns``; ``last`` ends it.

    A named tuple: the front unpacks thousands of them per second.
    """

    seq_id: int
    token: int
    at_ns: int
    last: bool


class Engine(Protocol):
    def submit(self, seq: SeqRequest, now_ns: int) -> None: ...

    def cancel(self, seq_id: int, now_ns: int) -> None: ...

    def next_event_ns(self) -> int | None: ...

    def advance(self, now_ns: int) -> list[Emission]: ...

    @property
    def running(self) -> int: ...

    @property
    def waiting(self) -> int: ...


@dataclass(frozen=True)
class PacingParams:
    """A fixed-latency server with at most ``capacity`` sequences generating at once; the rest wait (FIFO).

    For an admitted sequence: token 0 at ``admit + ttft_ms``, token k at ``admit + ttft_ms + k * itl_ms``.
    """

    ttft_ms: float = 200.0
    itl_ms: float = 20.0
    capacity: int = 32

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0:
            raise ValueError("ttft_ms and itl_ms must be >= 0")
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")

    def service_s(self, output_tokens: int) -> float:
        """Time a sequence holds a slot: ``ttft + (n - 1) * itl``."""
        return (self.ttft_ms + max(0, output_tokens - 1) * self.itl_ms) / 1000.0

    def steady_ttft_s(self, users: int, output_tokens: int) -> float:
        """Expected TTFT with ``users`` closed-loop clients (no think time) each asking for ``output_tokens``.

        Below capacity ``TTFT = ttft``. Above it, throughput is ``X = capacity / S`` (``S`` = :meth:`service_s`) and
        by Little's law each request spends ``R = users / X`` in the system, so ``TTFT = R - (n - 1) * itl``.
        """
        if users <= self.capacity:
            return self.ttft_ms / 1000.0
        response_s = users * self.service_s(output_tokens) / self.capacity
        return response_s - max(0, output_tokens - 1) * self.itl_ms / 1000.0

    @property
    def saturation_users(self) -> int:
        """Concurrency at which requests start to queue (the knee)."""
        return self.capacity


@dataclass
class _Running:
    seq: SeqRequest
    admitted_ns: int
    next_index: int = 0


@dataclass
class PacingEngine:
    """See :class:`PacingParams`. Counters: ``admitted``, ``queued`` (had to wait), ``finished``, ``cancelled``."""

    params: PacingParams = field(default_factory=PacingParams)
    admitted: int = 0
    queued: int = 0
    finished: int = 0
    cancelled: int = 0

    def __post_init__(self) -> None:
        self._running: dict[int, _Running] = {}
        self._waiting: deque[SeqRequest] = deque()
        self._heap: list[tuple[int, int]] = []  # (due_ns, seq_id); stale entries are skipped
        self._ttft_ns = round(self.params.ttft_ms * NS_PER_MS)
        self._itl_ns = round(self.params.itl_ms * NS_PER_MS)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, seq: SeqRequest, now_ns: int) -> None:
        if len(self._running) < self.params.capacity:
            self._admit(seq, now_ns)
        else:
            self.queued += 1
            self._waiting.append(seq)

    def cancel(self, seq_id: int, now_ns: int) -> None:
        if self._running.pop(seq_id, None) is not None:
            self.cancelled += 1
            self._admit_waiting(now_ns)
            return
        for seq in self._waiting:
            if seq.seq_id == seq_id:
                self._waiting.remove(seq)
                self.cancelled += 1
                return

    def next_event_ns(self) -> int | None:
        heap = self._heap
        while heap and heap[0][1] not in self._running:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def advance(self, now_ns: int) -> list[Emission]:
        out: list[Emission] = []
        heap, running, itl_ns = self._heap, self._running, self._itl_ns
        while heap:
            due_ns, seq_id = heap[0]
            if due_ns > now_ns:
                break
            run = running.get(seq_id)
            if run is None:
                heapq.heappop(heap)
                continue
            index = run.next_index
            if index >= run.seq.output_tokens - 1:
                heapq.heappop(heap)
                out.append(Emission(seq_id, index, due_ns, True))
                del running[seq_id]
                self.finished += 1
                self._admit_waiting(due_ns)
            else:  # its next token takes its place in the heap: one sift instead of a pop and a push
                run.next_index = index + 1
                heapq.heapreplace(heap, (due_ns + itl_ns, seq_id))
                out.append(Emission(seq_id, index, due_ns, False))
        return out

    def _admit(self, seq: SeqRequest, at_ns: int) -> None:
        self.admitted += 1
        self._running[seq.seq_id] = _Running(seq, at_ns)
        heapq.heappush(self._heap, (at_ns + self._ttft_ns, seq.seq_id))

    def _admit_waiting(self, at_ns: int) -> None:
        while self._waiting and len(self._running) < self.params.capacity:
            self._admit(self._waiting.popleft(), at_ns)
