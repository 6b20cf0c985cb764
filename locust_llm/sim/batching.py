"""A continuous-batching engine on a KV-cache budget, as vLLM schedules. Pure: arrivals in, token times out.

Each step: grow the running sequences (preempting the newest when the cache cannot hold their next token), admit
from a strict FIFO queue while blocks, ``max_batch`` and the prefill budget allow, last ``decode_ms(batch) +
prefill_ms_per_1k * uncached_tokens / 1000``, and emit one token per sequence. Sequences sharing a cached prefix hold
its full blocks once. So TTFT grows with the queue, ITL steps with the batch and throughput plateaus once the cache is
full. docs/simulator.md, "Continuous batching".
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from locust_llm.sim.engine import NS_PER_MS, Emission, SeqRequest
from locust_llm.sim.prefix import PrefixCache

__all__ = ["DEFAULT_DECODE_TABLE", "BatchParams", "BatchingEngine"]

DEFAULT_DECODE_TABLE: tuple[tuple[int, float], ...] = (
    (8, 12.0),
    (16, 14.0),
    (32, 17.0),
    (64, 22.0),
    (128, 30.0),
    (256, 45.0),
)
"""(batch size bound, decode step ms): batches up to 8 take 12 ms per step, up to 16 take 14 ms, ..."""


@dataclass(frozen=True)
class BatchParams:
    kv_blocks: int = 512
    block_tokens: int = 16
    max_batch: int = 256
    decode_table: tuple[tuple[int, float], ...] = DEFAULT_DECODE_TABLE
    prefill_ms_per_1k: float = 25.0
    max_prefill_tokens: int = 8192
    watermark: float = 0.01
    min_step_ms: float = 1.0
    prefix_cache_tokens: int = 65_536
    prefix_ttl_s: float = 300.0

    def __post_init__(self) -> None:
        if self.kv_blocks < 1 or self.block_tokens < 1 or self.max_batch < 1:
            raise ValueError("kv_blocks, block_tokens and max_batch must be >= 1")
        if not self.decode_table:
            raise ValueError("the decode step table needs at least one entry")
        bounds = [b for b, _ in self.decode_table]
        if bounds != sorted(set(bounds)) or bounds[0] < 1:
            raise ValueError(f"decode table batch bounds must be strictly increasing and >= 1, got {bounds}")
        if any(ms <= 0 for _, ms in self.decode_table):
            raise ValueError("decode step times must be > 0 ms")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"watermark must be within [0, 1), got {self.watermark}")
        if self.prefill_ms_per_1k < 0 or self.max_prefill_tokens < 1:
            raise ValueError("prefill_ms_per_1k must be >= 0 and max_prefill_tokens >= 1")

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * self.block_tokens

    @property
    def usable_blocks(self) -> int:
        return self.kv_blocks - int(self.kv_blocks * self.watermark)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    def decode_ms(self, batch: int) -> float:
        """Step time of a decode batch of ``batch`` sequences (beyond the table: linear in the batch)."""
        for bound, ms in self.decode_table:
            if batch <= bound:
                return ms
        bound, ms = self.decode_table[-1]
        return ms * batch / bound

    def prefill_ms(self, tokens: float) -> float:
        return self.prefill_ms_per_1k * tokens / 1000.0


@dataclass
class _Seq:
    req: SeqRequest
    arrival_ns: int
    shared_blocks: int = 0  # full blocks of its shareable prefix, held with the other sequences sharing it
    shared_tokens: int = 0
    order: int = 0
    generated: int = 0
    blocks: int = 0  # its own blocks
    holding: bool = False  # it counts among its prefix's holders
    prefilled: bool = False
    preempted: int = 0

    @property
    def length(self) -> int:
        return self.req.prompt_tokens + self.generated


@dataclass
class _Step:
    start_ns: int
    end_ns: int
    decode: list[_Seq]
    prefill: list[_Seq]


@dataclass
class BatchingEngine:
    """See the module docstring. Counters are public attributes; ``used_blocks`` never exceeds ``kv_blocks``."""

    params: BatchParams = field(default_factory=BatchParams)
    admitted: int = 0
    queued: int = 0
    finished: int = 0
    cancelled: int = 0
    preemptions: int = 0
    prefix_hits: int = 0
    prefix_hit_tokens: int = 0
    steps: int = 0
    used_blocks: int = 0
    peak_used_blocks: int = 0
    shared_blocks: int = 0  # blocks of shared prefixes now held (counted once in used_blocks)

    def __post_init__(self) -> None:
        self._waiting: deque[_Seq] = deque()
        self._running: dict[int, _Seq] = {}
        self._step: _Step | None = None
        self._order = 0
        self._holders: dict[str, int] = {}  # shareable prefix -> running sequences holding it
        self.cached_tokens: dict[int, int] = {}
        """seq_id -> prompt tokens served from the prefix cache (its usage's ``cached_tokens``); the caller pops it
        when the sequence ends."""
        self.prefix = PrefixCache(self.params.prefix_cache_tokens, self.params.prefix_ttl_s)

    # -- interface -------------------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, seq: SeqRequest, now_ns: int) -> None:
        if seq.output_tokens < 1:
            raise ValueError("a sequence must generate at least one token")
        if self.params.blocks_for(seq.prompt_tokens + seq.output_tokens) > self.params.usable_blocks:
            raise ValueError(
                f"a sequence of {seq.prompt_tokens + seq.output_tokens} tokens can never fit the KV cache "
                f"({self.params.usable_blocks * self.params.block_tokens} usable tokens)"
            )
        item = _Seq(seq, now_ns)
        if seq.prefix_key is not None:
            item.shared_blocks = seq.prefix_tokens // self.params.block_tokens
            item.shared_tokens = item.shared_blocks * self.params.block_tokens
        if self._step is None:
            self._waiting.append(item)
            self._begin_step(now_ns)
        else:
            self.queued += 1
            self._waiting.append(item)

    def cancel(self, seq_id: int, now_ns: int) -> None:
        self.cached_tokens.pop(seq_id, None)
        item = self._running.pop(seq_id, None)
        if item is not None:
            self._free(item)
            self.cancelled += 1
            return
        for item in self._waiting:
            if item.req.seq_id == seq_id:
                self._waiting.remove(item)
                self.cancelled += 1
                return

    def next_event_ns(self) -> int | None:
        return self._step.end_ns if self._step is not None else None

    def advance(self, now_ns: int) -> list[Emission]:
        out: list[Emission] = []
        while self._step is not None and self._step.end_ns <= now_ns:
            step = self._step
            self._step = None
            self._finish_step(step, out)
            if self._running or self._waiting:
                self._begin_step(step.end_ns)
        return out

    # -- steps -----------------------------------------------------------------------------------------------

    def _begin_step(self, start_ns: int) -> None:
        preempted = self._grow_running()
        prefill = [] if preempted else self._admit(start_ns)
        decode = [s for s in self._running.values() if s.prefilled]
        if not decode and not prefill:
            # only arrivals later than start_ns are queued (the caller advanced late): start at the first of them
            if self._waiting and self._waiting[0].arrival_ns > start_ns:
                self._begin_step(self._waiting[0].arrival_ns)
            return
        p = self.params
        prefill_tokens = sum(self._uncached(s, start_ns) for s in prefill)
        ms = (p.decode_ms(len(decode)) if decode else 0.0) + p.prefill_ms(prefill_tokens)
        duration = round(max(ms, p.min_step_ms) * NS_PER_MS)
        self._step = _Step(start_ns, start_ns + duration, decode, prefill)
        self.steps += 1

    def _grow_running(self) -> bool:
        bt = self.params.block_tokens
        kv_blocks = self.params.kv_blocks
        running = self._running
        preempted = False
        for seq in list(running.values()):
            if (seq.req.prompt_tokens + seq.generated + 1 - seq.shared_tokens) <= seq.blocks * bt:
                continue  # room for the next token in its last block: the usual case
            if seq.req.seq_id not in running or not seq.prefilled:
                continue
            while self.used_blocks + 1 > kv_blocks:
                victim = next(reversed(running.values()))
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            if seq.req.seq_id in running:
                self._take(seq, 1)
        return preempted

    def _admit(self, start_ns: int) -> list[_Seq]:
        p = self.params
        admitted: list[_Seq] = []
        budget = p.max_prefill_tokens
        while self._waiting and len(self._running) < p.max_batch:
            head = self._waiting[0]
            if head.arrival_ns > start_ns:
                break
            need = p.blocks_for(head.length + 1 - head.shared_tokens)
            key = head.req.prefix_key
            if (
                self.used_blocks + need + (head.shared_blocks if key and not self._holders.get(key) else 0)
                > p.usable_blocks
            ):
                break
            tokens = head.length
            if admitted and tokens > budget:
                break
            budget -= tokens
            self._waiting.popleft()
            self._order += 1
            head.order = self._order
            self._running[head.req.seq_id] = head
            self._hold(head)
            self._take(head, need)
            if not head.preempted:
                self.admitted += 1
            admitted.append(head)
        return admitted

    def _uncached(self, seq: _Seq, now_ns: int) -> int:
        """The tokens ``seq`` must prefill: all but the longest cached prefix among its lookups."""
        req = seq.req
        lookups = req.lookups or (((req.prefix_key, req.prefix_tokens),) if req.prefix_key is not None else ())
        for key, tokens in lookups:
            if tokens > 0 and self.prefix.lookup(key, now_ns):
                self.prefix_hits += 1
                self.prefix_hit_tokens += tokens
                self.cached_tokens[req.seq_id] = tokens
                return max(0, seq.length - tokens)
        return seq.length

    def _finish_step(self, step: _Step, out: list[Emission]) -> None:
        end = step.end_ns
        running = self._running
        for seq in step.prefill:
            if seq.req.seq_id in running:
                seq.prefilled = True
                if seq.req.prefix_key is not None and seq.req.prefix_tokens > 0:
                    self.prefix.insert(seq.req.prefix_key, seq.req.prefix_tokens, end)
                for key, tokens in seq.req.inserts:  # every prefix, as vLLM caches every full block
                    self.prefix.insert(key, tokens, end)
        append = out.append
        for group in (step.decode, step.prefill):
            for seq in group:
                seq_id = seq.req.seq_id
                if seq_id not in running:
                    continue  # cancelled or preempted during the step
                index = seq.generated
                seq.generated = generated = index + 1
                last = generated >= seq.req.output_tokens
                append(Emission(seq_id, index, end, last))
                if last:
                    del running[seq_id]
                    self._free(seq)
                    self.finished += 1

    # -- KV accounting ---------------------------------------------------------------------------------------

    def _take(self, seq: _Seq, blocks: int) -> None:
        seq.blocks += blocks
        self.used_blocks += blocks
        self.peak_used_blocks = max(self.peak_used_blocks, self.used_blocks)

    def _hold(self, seq: _Seq) -> None:
        """``seq`` joins its shareable prefix's holders; the first one takes the prefix's blocks."""
        key = seq.req.prefix_key
        if key is None or seq.shared_blocks == 0:
            return
        holders = self._holders.get(key, 0)
        if holders == 0:
            self.shared_blocks += seq.shared_blocks
            self.used_blocks += seq.shared_blocks
            self.peak_used_blocks = max(self.peak_used_blocks, self.used_blocks)
        self._holders[key] = holders + 1
        seq.holding = True

    def _free(self, seq: _Seq) -> None:
        self.used_blocks -= seq.blocks
        seq.blocks = 0
        if seq.holding:
            seq.holding = False
            key = seq.req.prefix_key
            assert key is not None
            holders = self._holders[key] - 1
            if holders:
                self._holders[key] = holders
            else:
                del self._holders[key]
                self.used_blocks -= seq.shared_blocks
                self.shared_blocks -= seq.shared_blocks

    def _preempt(self, seq: _Seq) -> None:
        del self._running[seq.req.seq_id]
        self._free(seq)
        seq.prefilled = False
        seq.preempted += 1
        self.preemptions += 1
        self._waiting.appendleft(seq)
