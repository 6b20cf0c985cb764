"""Traces of real traffic (``--trace``): JSON Lines of timestamped requests, replayed at a speed. Pure.

The Mooncake format: ``timestamp`` (ms), ``input_length`` or the text, optional ``output_length``, ``hash_ids``
(shared leading ids share a prefix) and ``model``. Each pass over the trace salts its prompts, so ``hash_ids`` share
within a pass only (``--trace-cache-across-steps``: no salt). Entries sharing a ``session_id`` are one conversation.
Docs: docs/workloads.md, "Replay your own traffic".
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locust_llm.workload.prompts import Message, synthetic_text

__all__ = ["REQUEST_TOKENS", "Trace", "TraceEntry", "TraceError", "block_text", "load_trace", "synth"]

REQUEST_TOKENS = 3  # a request's own tokens in the project's estimate (locust_llm.protocol.tokens), and 4 per message
MESSAGE_TOKENS = 4


class TraceError(ValueError):
    """A trace line that cannot be used; the message is one line naming the file, the line and the field."""


@dataclass(frozen=True)
class TraceEntry:
    t_s: float
    input_length: int | None = None
    messages: tuple[Message, ...] | None = None
    output_length: int | None = None
    hash_ids: tuple[int, ...] = ()
    model: str | None = None
    session: str | None = None  # session_id: the conversation it is a turn of
    delay_s: float = 0.0  # a later turn: the think time after the answer to the turn before


@dataclass(frozen=True)
class Trace:
    path: str
    entries: tuple[TraceEntry, ...]
    block_tokens: int = 512

    @functools.cached_property
    def turns(self) -> dict[int, tuple[int, ...]]:
        """Per session, its first entry's index -> its later entries' indexes, in order (module docstring)."""
        first: dict[str, int] = {}
        later: dict[int, list[int]] = {}
        for i, entry in enumerate(self.entries):
            if entry.session is None:
                continue
            if entry.session in first:
                later[first[entry.session]].append(i)
            else:
                first[entry.session] = i
                later[i] = []
        return {start: tuple(rest) for start, rest in later.items()}

    @functools.cached_property
    def starts(self) -> tuple[int, ...]:
        """The entries that arrive at their timestamps: every entry but a session's later turns."""
        later = {i for rest in self.turns.values() for i in rest}
        return tuple(i for i in range(len(self.entries)) if i not in later)

    @property
    def sessions(self) -> bool:
        return bool(self.turns)

    @property
    def period_s(self) -> float:
        """The trace's length as it repeats: from its first arrival to its last, plus one mean gap (a constant rate
        ``r`` of ``n`` arrivals repeats every ``n / r``); one second for a single arrival, or several at once."""
        starts = self.starts
        n, span = len(starts), self.entries[starts[-1]].t_s - self.entries[starts[0]].t_s
        return span + span / (n - 1) if n > 1 and span > 0 else 1.0

    @property
    def rate_req_s(self) -> float:
        """Requests per second of the trace at speed 1 (a session's every turn counted)."""
        return len(self.entries) / self.period_s

    def schedule(
        self, speed: float, index: int = 0, processes: int = 1, offset_s: float = 0.0, duration_s: float | None = None
    ) -> Iterator[tuple[float, int, int]]:
        """``(t, i, wrap)``: entry ``i`` is due ``t`` seconds into a step at ``speed``, in the step's ``wrap``-th pass
        over the trace (0 first): the trace from ``offset_s`` on, and again from its start each time it ends (until
        ``duration_s``, or for ever). Process ``index`` of ``processes`` gets the arrivals (:attr:`starts`) whose
        position is ``index`` modulo ``processes``: each is sent once per pass, by one, a session with all its turns."""
        period, starts = self.period_s, self.starts
        if index >= len(starts):
            return
        for cycle in itertools.count():
            for i in starts[index::processes]:
                t = (self.entries[i].t_s - offset_s + cycle * period) / speed
                if t < 0:
                    continue
                if duration_s is not None and t >= duration_s:
                    return
                yield t, i, cycle

    def describe(self, speeds: tuple[float, ...], duration_s: float, offset_s: float = 0.0) -> str:
        """One line for the log: the trace, its own rate, and the speeds whose steps wrap around to its start."""
        text = (
            f"replaying {self.path}: {len(self.entries)} requests over {self.period_s:g} s ({self.rate_req_s:.4g} "
            f"req/s at speed 1)"
        )
        wraps = [s for s in speeds if offset_s + duration_s * s > self.period_s]
        if wraps:
            text += (
                f"; a step of {duration_s:g} s at speed {', '.join(f'{s:g}' for s in wraps)} replays more than the "
                f"trace holds from {offset_s:g} s: it wraps around to its start"
            )
        return text

    def messages(self, i: int, salt: str = "") -> list[Message]:
        """Entry ``i``'s messages in the pass salted ``salt`` (module docstring): its own, its text, or
        ``input_length`` tokens built block by block from its ``hash_ids`` (one message per block, each id always
        the same bytes; :func:`block_text`) and, past them, its own filler; the project's estimate of the prompt is
        then ``input_length`` tokens. The salt replaces the first bytes of the first message (a trace's own text:
        a first line of its own): every prefix of the prompt then differs from another pass's, as a prefix cache
        chains each block to the ones before it, while the blocks' text stays cached here."""
        entry = self.entries[i]
        if entry.messages is not None:
            own = [dict(m) for m in entry.messages]
            if salt and own and isinstance(own[0].get("content"), str):
                own[0]["content"] = f"[{salt}]\n{own[0]['content']}"
            return own
        left = int(entry.input_length or 1) - REQUEST_TOKENS  # tokens for the messages
        out: list[Message] = []
        for block in entry.hash_ids:
            if left < self.block_tokens + MESSAGE_TOKENS + 1:  # a whole block, and room for the last message
                break
            out.append({"role": "user", "content": block_text(block, self.block_tokens - MESSAGE_TOKENS)})
            left -= self.block_tokens
        tokens = max(1, left - MESSAGE_TOKENS)
        text = f"[{i}] " + synthetic_text(tokens, random.Random(f"trace-entry:{i}"))
        out.append({"role": "user", "content": text[: max(1, 4 * tokens - 1)]})
        if salt:  # in place of as many bytes: the same length, so the same token estimate
            tag, first = f"[{salt}] ", out[0]["content"]
            out[0]["content"] = tag + first[len(tag) :]
        return out


@functools.lru_cache(maxsize=4096)
def block_text(block: int, tokens: int) -> str:
    """The text of block ``block``: ``tokens`` tokens (4 bytes each, less one), always the same."""
    return synthetic_text(tokens, random.Random(f"trace-block:{block}"))


def _entry(path: str, number: int, line: str, later: set[str]) -> TraceEntry:
    """Line ``number``; ``later``: the sessions already begun, whose entries here are later turns."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}:{number}: not a JSON object")

    def bad(field: str, allowed: str) -> TraceError:
        return TraceError(f"{path}:{number}: {field} must be {allowed}, got {data.get(field)!r}")

    session = data.get("session_id")
    if session is not None and (isinstance(session, bool) or not isinstance(session, str | int) or session == ""):
        raise bad("session_id", "a string or a whole number")
    session = None if session is None else str(session)
    delay = data.get("delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise bad("delay", "a number of ms >= 0")
    t = data.get("timestamp")
    if t is None and session is not None and session in later:
        t = 0  # a session's later turn follows the turn before, not the clock
    elif isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise bad("timestamp", "a number of ms >= 0")
    lengths = {}
    for field in ("input_length", "output_length"):
        value = data.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(field, "a whole number of tokens >= 1")
        lengths[field] = value
    messages: tuple[Message, ...] | None = None
    if "messages" in data:
        raw = data["messages"]
        if not isinstance(raw, list) or not raw or not all(isinstance(m, dict) and "role" in m for m in raw):
            raise bad("messages", "a non-empty list of OpenAI messages (each with a role)")
        messages = tuple(raw)
    elif "text_input" in data:
        if not isinstance(data["text_input"], str) or not data["text_input"]:
            raise bad("text_input", "a non-empty string")
        messages = ({"role": "user", "content": data["text_input"]},)
    elif lengths["input_length"] is None:
        raise TraceError(f"{path}:{number}: needs input_length, text_input or messages (none given)")
    ids = data.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise bad("hash_ids", "a list of whole numbers")
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise bad("model", "a model name")
    return TraceEntry(
        t / 1000.0,
        lengths["input_length"],
        messages,
        lengths["output_length"],
        tuple(ids),
        model,
        session,
        delay / 1000.0,
    )


def load_trace(path: str | Path, block_tokens: int = 512) -> Trace:
    """The trace in ``path``; :class:`TraceError` (one line) for the first line that cannot be used."""
    name = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"--trace {name}: cannot be read ({exc})") from None
    entries: list[TraceEntry] = []
    begun: set[str] = set()
    last = 0.0  # the latest arrival's time: arrivals (all but a session's later turns) are in time order
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry = _entry(name, number, line, begun)
        if entry.session is None or entry.session not in begun:
            if entry.t_s < last:
                raise TraceError(
                    f"{name}:{number}: timestamp goes backwards ({entry.t_s * 1000:g} ms after {last * 1000:g} ms): "
                    "a trace is in time order"
                )
            last = entry.t_s
        if entry.session is not None:
            begun.add(entry.session)
        entries.append(entry)
    if not entries:
        raise TraceError(f"--trace {name}: holds no request")
    return Trace(name, tuple(entries), block_tokens)


def synth(
    rate: float,
    minutes: float,
    cv: float,
    prefix_share: float,
    seed: int = 1,
    turns: tuple[int, int] | None = None,
    think_s: float = 5.0,
) -> Iterator[dict[str, Any]]:
    """A made-up trace: arrivals at ``rate`` per second for ``minutes``, gaps of coefficient of variation ``cv``
    (1: Poisson; gamma-distributed), prompts of 1-3 blocks of 512 tokens (the last one 64-448) and 32-256 output
    tokens, within a 2,048-token context, where a share ``prefix_share`` of requests starts with one of 8 shared
    2-block prefixes. With ``turns`` (low, high), each arrival is a session of a uniform number of turns in that
    range; each later turn (32-256 new tokens, 32-256 output tokens) follows the answer before it after an
    exponential think time of mean ``think_s``, listed right after its session's first turn."""
    rng = random.Random(seed)
    session = 0
    shape = 1.0 / (cv * cv) if cv > 0 else None
    t, next_block = 0.0, 1000
    while t < minutes * 60:
        blocks = rng.randint(1, 3)
        if rng.random() < prefix_share:
            prefix = rng.randrange(8)
            ids = [2 * prefix, 2 * prefix + 1][:blocks]
        else:
            ids = []
        while len(ids) < blocks:
            ids.append(next_block)
            next_block += 1
        length = 512 * (blocks - 1) + rng.randint(64, 448)
        first = {"timestamp": round(t * 1000), "input_length": length, "output_length": rng.randint(32, 256)}
        if turns is None:
            yield {**first, "hash_ids": ids}
        else:
            session += 1
            yield {**first, "hash_ids": ids, "session_id": session}
            for _ in range(rng.randint(*turns) - 1):
                delay = round(rng.expovariate(1.0 / think_s) * 1000) if think_s > 0 else 0
                yield {
                    "session_id": session,
                    "delay": delay,
                    "input_length": rng.randint(32, 256),
                    "output_length": rng.randint(32, 256),
                }
        t += rng.gammavariate(shape, 1.0 / (rate * shape)) if shape else 1.0 / rate
