"""The simulator's running state: each model's replicas (an engine and the timer that emits its tokens), its rate
limiter and counters, and the responses in flight.

One timer per replica writes each due token straight to its stream's transport as one HTTP chunk; every request
handler first emits any overdue step (:meth:`Replica.catch_up`). docs/simulator.md, "Timing of the writes".
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections import Counter
from dataclasses import asdict
from typing import Any

from locust_llm.protocol.tokens import message_tokens
from locust_llm.shapes.arrivals import Arrivals
from locust_llm.sim.alarm import Alarm
from locust_llm.sim.batching import BatchingEngine
from locust_llm.sim.chunks import frame
from locust_llm.sim.engine import Emission, PacingEngine, SeqRequest
from locust_llm.sim.faults import MID_STREAM
from locust_llm.sim.limits import RateLimiter
from locust_llm.sim.prefix import next_key
from locust_llm.sim.presets import ModelSpec, SimConfig
from locust_llm.sim.response import Stream
from locust_llm.sim.timing import ALARM_GUARD_NS, EARLY_NS, LATE_NS, MAX_SPIN_NS, EmissionError, WriteLead
from locust_llm.sim.truth import open_loop_truth, saturation_users, steady_state
from locust_llm.sim.words import TOKEN_JSON, token_id, token_text

__all__ = ["REFERENCE_WORKLOAD", "ModelRuntime", "Replica"]

REFERENCE_WORKLOAD = {"prompt_tokens": 30, "max_tokens": 128}
"""The workload of the truth shown in ``/sim/stats``: about the built-in prompts with the default --max-tokens."""


_Taken = tuple[Stream, int, int, bool, int]
"""(stream, token index, due, last, stamp): the stamp of a response not streamed, else 0 until written."""


class _Made:
    """A step whose chunks are made: what its writes need, and when they are to begin (:meth:`Replica._fire`)."""

    __slots__ = ("cancelled", "due", "planned", "ready", "start", "taken", "writes")

    def __init__(self, due: int, planned: int) -> None:
        self.due, self.planned = due, planned  # when the step ends (read by bench/sim_steps.py); its alarm's plan
        self.ready = self.start = 0  # when its chunks were made; when its writes are to begin (0: at once)
        self.taken: list[_Taken] = []
        self.writes: list[tuple[Any, bytes]] = []  # (transport.write, chunk) of each token to write
        self.cancelled = False  # a stream of it was cancelled after it was made


class Replica:
    """One engine and the timer that emits its tokens."""

    def __init__(self, runtime: ModelRuntime, engine: PacingEngine | BatchingEngine) -> None:
        self.runtime = runtime
        self.engine = engine
        self.streams: dict[int, Stream] = {}
        self._alarm: Alarm | None = None  # made in the running loop on first use
        self._due_ns: int | None = None  # the engine event the alarm is armed for
        self._planned_ns = 0  # when the alarm was asked to ring
        self._made: _Made | None = None  # a step made, its alarm re-armed for its writes' instant
        self.lead = WriteLead()

    @property
    def load(self) -> int:
        return self.engine.running + self.engine.waiting

    def submit(self, stream: Stream, seq: SeqRequest) -> None:
        self.streams[stream.seq_id] = stream
        self.engine.submit(seq, time.monotonic_ns())
        self._reschedule()

    def cancel(self, stream: Stream) -> None:
        if self.streams.pop(stream.seq_id, None) is not None:
            self.engine.cancel(stream.seq_id, time.monotonic_ns())
            self.runtime.release(stream)
            if self._made is not None:
                self._made.cancelled = True
            self._reschedule()

    def _reschedule(self) -> None:
        due = self.engine.next_event_ns()
        if due is None or self._made is not None or (self._due_ns is not None and self._due_ns <= due):
            return  # (a step made and waiting to be written re-arms the alarm once written)
        if self._alarm is None:
            self._alarm = Alarm(asyncio.get_running_loop(), self._fire)
        self._due_ns = due
        self._planned_ns = due - self.lead.lead_ns()
        self._alarm.arm(self._planned_ns)

    def catch_up(self, now_ns: int) -> None:
        """Emit the step now if its alarm should have rung already: called by the request handlers, so that a burst
        of requests (a whole batch of clients starting over at once) delays a step by one handler, not by all of
        them, which run before the loop next looks at the alarm (module docstring)."""
        if now_ns >= self._planned_ns and (self._due_ns is not None or self._made is not None):
            self._fire()

    def _fire(self) -> None:
        """The alarm rang (or a handler caught up): make the due step's chunks, then write them now, or, for a step
        to start precisely (:mod:`.timing`), at their instant, the alarm re-armed for it and the loop free till then."""
        made = self._made
        if made is not None:
            self._made = None
            self._written(made)
            return
        due = self._due_ns
        if due is None:
            return  # the step was emitted by catch_up; the alarm had turned readable before it was re-armed
        self._due_ns = None
        emissions = self.engine.advance(max(time.monotonic_ns() + EARLY_NS, due))
        made = self._make(emissions, due)
        made.ready = time.monotonic_ns()
        made.start = self.lead.start_ns(due, len(made.writes))
        alarm = self._alarm
        if alarm is not None and alarm.precise and made.start - made.ready > 2 * ALARM_GUARD_NS:  # yield till then
            self._made, self._due_ns = made, None  # (a cancel while making may have re-armed it)
            self._planned_ns = made.start - ALARM_GUARD_NS
            alarm.arm(self._planned_ns)
        else:
            self._written(made)

    def _written(self, made: _Made) -> None:
        """Write a made step (after a spin to its instant, at most :data:`MAX_SPIN_NS`), learn from it, re-arm."""
        if made.cancelled:  # a stream of it went away while it waited: its tokens are neither written nor filed
            streams, writes = self.streams, iter(made.writes)
            taken: list[_Taken] = []
            kept: list[tuple[Any, bytes]] = []
            for entry in made.taken:
                write = None if entry[4] else next(writes)
                if entry[0].seq_id in streams:
                    taken.append(entry)
                    if write is not None:
                        kept.append(write)
            made.taken, made.writes = taken, kept
        begin, end = self._write(made)
        self.lead.observe(len(made.taken), made.ready - made.planned, end - begin)
        self._reschedule()

    def close(self) -> None:
        """Release the alarm (shutting down)."""
        self._made = None
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None

    def _make(self, emissions: list[Emission], due: int) -> _Made:
        """Make every emitted token's chunk (a token of a response not streamed is added to its text and stamped
        now); a stream whose client has gone is cancelled, a mid-stream fault injected. Nothing is written yet."""
        streams = self.streams
        seed = self.runtime.seed
        clock = time.monotonic_ns
        made = _Made(due, self._planned_ns)
        taken, writes = made.taken, made.writes
        for seq_id, index, at_ns, last in emissions:
            stream = streams.get(seq_id)
            if stream is None:
                continue
            transport = stream.transport
            if transport is None:
                stream.text.append(token_text(seed, seq_id, index))
                if last:
                    stream.cached = self.cached_tokens(stream)
                taken.append((stream, index, at_ns, last, clock()))
                continue
            if transport.is_closing():
                self.cancel(stream)
                stream.finish()
                continue
            if stream.fault is not None and index == stream.fault_at and stream.fault in MID_STREAM:
                self._inject(stream, transport)
                continue
            head = stream.head if index >= stream.reasoning else stream.reasoning_head
            word = TOKEN_JSON[token_id(seed, seq_id, index)]
            tail = stream.tail if not stream.numbered else b"%b%d}\n\n" % (stream.tail, stream.numbered + index)
            if last:
                payload = head + word + tail + stream.final_chunks("length", self.cached_tokens(stream))
                chunk = b"%x\r\n%b\r\n" % (len(payload), payload)
            else:  # one formatting, no joined payload: the usual token
                chunk = b"%x\r\n%b%b%b\r\n" % (len(head) + len(word) + len(tail), head, word, tail)
            writes.append((transport.write, chunk))  # type: ignore[attr-defined]
            taken.append((stream, index, at_ns, last, 0))
        return made

    def _write(self, made: _Made) -> tuple[int, int]:
        """Write a made step: the simulator's hot path. A spin to its instant (:meth:`WriteLead.start_ns`; none when
        it has passed or the step is small), then a loop that does nothing but write and stamp each write's end, so
        that the step's writes span as little time as they can (:mod:`.timing`); then each token's error and
        delivered interval, and the streams that ended, are filed in the emissions' order. Returns when the writes
        began and when the last ended."""
        streams = self.streams
        runtime = self.runtime
        clock = time.monotonic_ns
        stamps: list[int] = []
        stamp = stamps.append
        begin = clock()
        at = min(made.start, begin + MAX_SPIN_NS)
        while begin < at:  # bounded: at most MAX_SPIN_NS
            begin = clock()
        for write, chunk in made.writes:
            write(chunk)
            stamp(clock())
        errors: list[int] = []
        ending: list[Stream] = []  # ended with a conversation to cache: cached after the last write
        firsts: list[int] = []  # delivered TTFTs and ITLs (.timing)
        gaps: list[int] = []
        written = iter(stamps)
        for stream, index, at_ns, last, at in made.taken:
            if not at:
                at = next(written)
                (gaps if index else firsts).append(at - stream.sent_ns)
                stream.sent_ns = at
            errors.append(at - at_ns)
            if last:
                del streams[stream.seq_id]
                runtime.release(stream)
                stream.finish()
                if stream.history is not None:
                    ending.append(stream)
        for stream in ending:  # no request is read before this callback returns: the next turn finds it cached
            self.remember(stream)
        runtime.tokens_emitted += len(errors)
        runtime.late_tokens += runtime.emission.add(errors, LATE_NS)
        runtime.emission.deliver(firsts, gaps)
        return begin, stamps[-1] if stamps else begin

    def cached_tokens(self, stream: Stream) -> int:
        """``stream`` has its last token: its prompt tokens its engine served from the prefix cache."""
        engine = self.engine
        return engine.cached_tokens.pop(stream.seq_id, 0) if isinstance(engine, BatchingEngine) else 0

    def remember(self, stream: Stream) -> None:
        """``stream`` has ended: its conversation so far enters the prefix cache (docs/simulator.md, "Prefix cache")."""
        engine = self.engine
        if stream.history is None or not isinstance(engine, BatchingEngine):
            return
        key, tokens = stream.history
        text = "".join(stream.text) if stream.transport is None else stream.reply(self.runtime.seed)
        reply = {"role": "assistant", "content": text}
        engine.prefix.insert(next_key(key, reply), tokens + message_tokens(reply), time.monotonic_ns())

    def _inject(self, stream: Stream, transport: asyncio.BaseTransport) -> None:
        """A mid-stream fault at token ``fault_at`` (see :mod:`.faults`)."""
        fault = stream.fault
        if fault == "malformed":
            transport.write(frame(b'data: {"choices": [{"index": 0, "delta": {"content": "\n\n'))  # type: ignore[attr-defined]
            stream.fault = None
            return
        self.cancel(stream)
        if fault == "reset":
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()  # type: ignore[attr-defined]
            stream.finish()
        elif fault == "stall":
            asyncio.get_running_loop().call_later(self.runtime.stall_s, _end_stall, transport, stream)


def _end_stall(transport: asyncio.BaseTransport, stream: Stream) -> None:
    transport.close()
    stream.finish()


class ModelRuntime:
    """One model: its replicas, its rate limiter and its counters."""

    def __init__(self, spec: ModelSpec, config: SimConfig, emission: EmissionError) -> None:
        self.spec = spec
        self.seed = config.seed
        self.stall_s = config.stall_s
        self.emission = emission
        self.limiter = RateLimiter(spec.limits)
        self.replicas = [Replica(self, self._engine()) for _ in range(spec.replicas)]
        self.tokens_emitted = 0
        self.late_tokens = 0
        self.status = Counter[str]()
        self.faults = Counter[str]()
        self.rejected_overload = 0

    def _engine(self) -> PacingEngine | BatchingEngine:
        if self.spec.engine == "pacing":
            return PacingEngine(self.spec.pacing)
        return BatchingEngine(self.spec.batch)

    @property
    def waiting(self) -> int:
        return sum(r.engine.waiting for r in self.replicas)

    def pick(self) -> Replica:
        return min(self.replicas, key=lambda r: r.load)

    def release(self, stream: Stream) -> None:
        if stream.key:
            self.limiter.release(stream.key)
            stream.key = ""

    def output_tokens(self, seq_id: int, max_tokens: int, min_tokens: int = 0) -> int:
        """The request's output length: drawn in ``[output_fraction * max_tokens, max_tokens]`` (where the model
        would stop by itself), and at least ``min_tokens`` (the request's minimum, where this server honours it)."""
        fraction = self.spec.output_fraction
        if fraction >= 1.0 or min_tokens >= max_tokens:
            return max_tokens
        low = max(1, round(fraction * max_tokens))
        return max(min_tokens, random.Random(self.seed * 7_777_777 + seq_id).randint(low, max_tokens))

    def mean_output(self, max_tokens: int, min_tokens: int = 0) -> int:
        """The mean of :meth:`output_tokens` over requests asking for ``max_tokens``, at least ``min_tokens``."""
        fraction = self.spec.output_fraction
        if not min_tokens:
            return round((1 + fraction) / 2 * max_tokens)
        if fraction >= 1.0 or min_tokens >= max_tokens:
            return max_tokens
        low = max(1, round(fraction * max_tokens))
        m = max(low, min_tokens)  # E[max(X, m)], X uniform on the integers low..max_tokens
        return round(((m - low) * m + (m + max_tokens) * (max_tokens - m + 1) / 2) / (max_tokens - low + 1))

    def stats(self) -> dict[str, Any]:
        engines = [r.engine for r in self.replicas]
        totals: dict[str, int] = {}
        for name in ("admitted", "queued", "finished", "cancelled", "running", "waiting"):
            totals[name] = sum(getattr(e, name) for e in engines)
        for name in ("preemptions", "prefix_hits", "prefix_hit_tokens", "used_blocks", "peak_used_blocks", "steps"):
            totals[name] = sum(getattr(e, name, 0) for e in engines)
        limiter = self.limiter
        return {
            **totals,
            "tokens_emitted": self.tokens_emitted,
            "tokens_late_over_5ms": self.late_tokens,
            "requests_by_status": dict(self.status),
            "rejected_429": limiter.rejected_concurrency + limiter.rejected_tpm,
            "rejected_429_concurrency": limiter.rejected_concurrency,
            "rejected_429_tpm": limiter.rejected_tpm,
            "rejected_503_overload": self.rejected_overload,
            "early_returns_after_429": limiter.early_returns,
            "faults_injected": dict(self.faults),
        }

    def gauges(self) -> dict[str, float]:
        """What a vLLM server exports about this model (its ``/metrics``): KV-cache usage (blocks held over blocks,
        batching engines only), requests running and waiting, and preemptions so far (a counter)."""
        engines = [r.engine for r in self.replicas]
        out: dict[str, float] = {
            "running": sum(e.running for e in engines),
            "waiting": sum(e.waiting for e in engines),
            "preemptions": sum(getattr(e, "preemptions", 0) for e in engines),
        }
        batching = [e for e in engines if isinstance(e, BatchingEngine)]
        if batching:
            out["kv_usage"] = sum(e.used_blocks for e in batching) / sum(e.params.kv_blocks for e in batching)
        return out

    def open_loop_truth(
        self,
        rate: float,
        arrivals: Arrivals,
        seed: str,
        prompt: int | None,
        max_tokens: int | None,
        min_tokens: int = 0,
    ) -> dict[str, Any]:
        """What an open loop of ``rate`` should see (:func:`~locust_llm.sim.truth.open_loop_truth`): the rate shared
        evenly by the replicas, each a fresh engine, outputs of the mean length."""
        prompt = prompt or REFERENCE_WORKLOAD["prompt_tokens"]
        mean_output = self.mean_output(max_tokens or REFERENCE_WORKLOAD["max_tokens"], min_tokens)
        truth = open_loop_truth(self._engine(), rate / self.spec.replicas, arrivals, seed, prompt, mean_output)
        return {**truth, "rate_req_s": rate}

    def truth(
        self,
        users: int | None = None,
        prompt: int | None = None,
        max_tokens: int | None = None,
        prefix: int = 0,
        min_tokens: int = 0,
    ) -> dict[str, Any]:
        """The analytic truth (:mod:`~locust_llm.sim.truth`) for a workload; ``prefix``: the tokens of a shared,
        cached prefix every prompt starts with (a system prompt this server caches); ``min_tokens``: each request's
        minimum output, where the server honours it."""
        prompt = prompt or REFERENCE_WORKLOAD["prompt_tokens"]
        max_tokens = max_tokens or REFERENCE_WORKLOAD["max_tokens"]
        mean_output = self.mean_output(max_tokens, min_tokens)
        spec = self.spec
        reasoning = min(spec.reasoning_tokens, mean_output - 1)
        out: dict[str, Any] = {
            "engine": spec.engine,
            "replicas": spec.replicas,
            "workload": {
                "prompt_tokens": prompt,
                "max_tokens": max_tokens,
                "mean_output_tokens": mean_output,
                "shared_prefix_tokens": prefix,
                "reasoning_tokens": reasoning,
            },
            "provider_cap_users": spec.limits.max_concurrent,
            "limits": asdict(spec.limits),
        }
        if spec.engine == "pacing":
            p = spec.pacing
            out["saturation_users"] = p.saturation_users * spec.replicas
            out["params"] = asdict(p)
            if users:
                per = -(-users // spec.replicas)
                out["steady"] = {"users": users, "ttft_s": p.steady_ttft_s(per, mean_output), "itl_s": p.itl_ms / 1e3}
            return out
        b = spec.batch
        out["saturation_users"] = saturation_users(b, prompt, mean_output, prefix) * spec.replicas
        out["params"] = {**asdict(b), "decode_table": [list(x) for x in b.decode_table]}
        if users:
            steady = steady_state(b, -(-users // spec.replicas), prompt, mean_output, prefix)
            out["steady"] = {
                **asdict(steady),
                "users": users,
                "output_tok_s": steady.output_tok_s * spec.replicas,
                "answer_ttft_s": steady.ttft_s + reasoning * steady.itl_s,
            }
        return out
