"""One response in flight in the simulator: its transport and framing, what a non-streamed one collects, and
what it reports when it ends.
"""

from __future__ import annotations

import asyncio
import time

from locust_llm.sim.chunks import ChunkFormat
from locust_llm.sim.words import token_texts

__all__ = ["Stream"]


class Stream:
    """One response in flight. Streaming ones write SSE chunks to ``transport``; others collect text."""

    __slots__ = (
        "cached",
        "done",
        "fault",
        "fault_at",
        "fmt",
        "head",
        "history",
        "key",
        "numbered",
        "output_tokens",
        "prompt_tokens",
        "reasoning",
        "reasoning_head",
        "sent_ns",
        "seq_id",
        "tail",
        "text",
        "transport",
    )

    def __init__(
        self,
        seq_id: int,
        model: str,
        prompt_tokens: int,
        output_tokens: int,
        transport: asyncio.BaseTransport | None,
        include_usage: bool,
        done: asyncio.Future[None],
        key: str = "",
        fault: str | None = None,
        reasoning: int = 0,
        history: tuple[str, int] | None = None,
        taken_ns: int | None = None,
        fmt: type[ChunkFormat] = ChunkFormat,
        tool: str | None = None,
    ) -> None:
        self.seq_id = seq_id
        self.sent_ns = time.monotonic_ns() if taken_ns is None else taken_ns
        """When its last token's write returned; until then, when the simulator took the request (``taken_ns``: its
        handler's start, before any overdue step the handler emitted first; else now), for the delivered TTFT."""
        self.cached = 0  # its cached prompt tokens, known when it ends
        self.reasoning = reasoning
        """How many of its first tokens are reasoning."""
        self.history = history
        """(key, tokens) of the request's messages, to cache with the reply when it ends (automatic caching)."""
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.transport = transport
        self.done = done
        self.key = key
        self.fault = fault
        self.fault_at = output_tokens // 2
        self.text: list[str] = []
        self.fmt = fmt(
            seq_id, model, include_usage, prompt_tokens, tool
        )  # the API's (sim/chunks.py and sim/serve_*.py)
        self.head, self.tail = self.fmt.head, self.fmt.tail
        self.reasoning_head = self.fmt.reasoning_head
        self.numbered = getattr(self.fmt, "FIRST_DELTA", 0) if self.fmt.numbered else 0
        """The first token's ``sequence_number`` when each token's event ends with one (after ``tail``); else 0."""

    def final_chunks(self, finish_reason: str, cached_tokens: int = 0) -> bytes:
        done = self.fault != "no-done"
        return self.fmt.final_chunks(
            finish_reason, self.prompt_tokens, self.output_tokens, done, cached_tokens, self.reasoning
        )

    def reply(self, seed: int) -> str:
        """The answer's text, as a client joins its content deltas."""
        return token_texts(seed, self.seq_id, self.reasoning, self.output_tokens)

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
