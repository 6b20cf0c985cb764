"""What is sent: :class:`Workload` (prompt source, lengths, system prompt, salt) and request bodies. Pure.

One source per run: built-in prompts, a file (``--prompts``), or synthetic prompts of ``--input-tokens
MEAN[:STDDEV]`` tokens at 4 bytes per token. ``--system-prompt`` is prepended (marked ``cache_control`` with
``--cache-control on``); a salt at the start of the user message keeps unintended prefix-cache hits from flattering
TTFT. Everything random comes from the user's own seeded ``random.Random``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from locust_llm.protocol import api_chat
from locust_llm.protocol.api import Api, Message, exact_fields
from locust_llm.protocol.api_chat import chat_body
from locust_llm.protocol.tokens import content_text, estimate_prompt_tokens
from locust_llm.workload.draws import (
    Length,
    PromptError,
    ThinkTime,
    Turns,
    parse_length,
    parse_think_time,
    parse_turns,
)
from locust_llm.workload.prompt_files import Prompt, load_prompt_file, load_prompts, read_system_prompt

__all__ = [
    "BUILTIN_TEMPLATES",
    "EXACT_FIELDS",
    "Length",
    "Message",
    "Prompt",
    "PromptError",
    "ThinkTime",
    "Turns",
    "Workload",
    "chat_body",
    "estimate_prompt_tokens",
    "exact_fields",
    "load_prompt_file",
    "load_prompts",
    "parse_length",
    "parse_think_time",
    "parse_turns",
    "read_system_prompt",
    "synthetic_text",
]

BUILTIN_TEMPLATES = (
    "Explain concept {i} of distributed systems in two sentences.",
    "Write a four-line poem about the number {i}.",
    "Summarise the plot of an imaginary novel titled 'Chapter {i}' in three sentences.",
    "List three practical tips for debugging issue #{i} in a web service.",
    "Describe, for a ten-year-old, why the sky looks different on day {i} of a trip.",
    "Give a short recipe idea that uses exactly {i} grams of flour.",
    "Compare two sorting algorithms for an array of {i} elements in a short paragraph.",
    "Translate the phrase 'load test number {i}' into French, German and Spanish.",
)

_FILLER = (
    "the quick brown fox jumps over lazy dogs while seven bright stars shine above quiet hills and rivers carry "
    "old stories toward distant seas where sailors share bread songs and careful plans"
).split()


def synthetic_text(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens (4 bytes each) of filler words."""
    words: list[str] = []
    size = 0
    target = 4 * tokens
    while size < target:
        word = rng.choice(_FILLER)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[: max(1, target - 1)]


EXACT_FIELDS = ("min_tokens", "ignore_eos")
"""What asks for ``max_tokens`` exactly (``--output-length exact``): :func:`~locust_llm.protocol.api.exact_fields`."""


@dataclass(frozen=True)
class Workload:
    """How each request's messages and ``max_tokens`` are made (module docstring); immutable and shared."""

    max_tokens: Length = Length(128)  # noqa: RUF009 (frozen)
    output_length: str = "auto"  # --output-length: exact, cap or auto (resolved per endpoint at the preflight)
    prompts: tuple[Prompt, ...] = ()
    input_tokens: Length | None = None
    system_prompt: str | None = None
    cache_control: bool = False
    salt: bool | None = None  # None: on for synthetic prompts only
    extra_body: dict[str, Any] | None = None
    turns: Turns | None = None  # None: auto (the prompt file's conversations, else single requests)
    think_time: ThinkTime = ThinkTime()  # noqa: RUF009 (frozen)
    max_context_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()  # --tools, OpenAI's format (each API converts them)
    tool_call_share: float | None = None  # --tool-call-share: a tool call asked for on this share of turns
    tool_result_tokens: int = 64  # --tool-result-tokens

    def describe(self) -> dict[str, Any]:
        """The workload for reports: where prompts come from, never their text."""
        source = "file" if self.prompts else ("synthetic" if self.input_tokens is not None else "built-in")
        return {
            "source": source,
            "prompts": len(self.prompts) or None,
            "input_tokens": None if self.input_tokens is None else [self.input_tokens.mean, self.input_tokens.stddev],
            "max_tokens": [self.max_tokens.mean, self.max_tokens.stddev],
            "output_length": self.output_length,
            "system_prompt": self.system_prompt is not None,
            "cache_control": self.cache_control,
            "salted": self.salted,
            "extra_body_keys": sorted(self.extra_body) if self.extra_body else [],
            "conversations": self.conversations,
            "turns": "auto" if self.turns is None else [self.turns.low, self.turns.high],
            "think_time_s": [self.think_time.seconds, self.think_time.jitter],
            "max_context_tokens": self.max_context_tokens,
            "tools": [t["function"]["name"] for t in self.tools],
            "tool_call_share": self.tool_call_share,
            "tool_result_tokens": self.tool_result_tokens if self.tools else None,
        }

    @property
    def salted(self) -> bool:
        return self.salt if self.salt is not None else self.input_tokens is not None

    def messages(self, rng: random.Random) -> tuple[list[Message], int]:
        """``(messages, max_tokens)`` of the next request."""
        max_tokens = self.max_tokens.draw(rng)
        if self.prompts:
            prompt = rng.choice(self.prompts)
            messages = [dict(m) for m in prompt.messages]
            max_tokens = prompt.max_tokens or max_tokens
        else:
            messages = [{"role": "user", "content": self.fresh_text(rng)}]
        if self.salted:
            messages[-1]["content"] = self.salted_text(messages[-1].get("content"), rng)
        return [*self.system_messages(), *messages], max_tokens

    def fresh_text(self, rng: random.Random) -> str:
        """A new user message from the source: a built-in prompt, a synthetic one, or a file prompt's last message."""
        if self.prompts:
            return content_text(rng.choice(self.prompts).messages[-1].get("content"))
        if self.input_tokens is not None:
            return synthetic_text(self.input_tokens.draw(rng), rng)
        return rng.choice(BUILTIN_TEMPLATES).format(i=rng.randrange(1, 10_000))

    def salted_text(self, content: Any, rng: random.Random) -> str:
        return f"[{rng.getrandbits(48):012x}] " + content_text(content)

    def system_messages(self) -> list[Message]:
        """``--system-prompt``'s message (marked ``cache_control`` with ``--cache-control on``), or none."""
        if self.system_prompt is None:
            return []
        system: Message = {"role": "system", "content": self.system_prompt}
        if self.cache_control:
            system["cache_control"] = {"type": "ephemeral"}
        return [system]

    @property
    def conversations(self) -> bool:
        """Whether users hold conversations: ``--turns`` above 1, or (``auto``) a prompt file with multi-turn ones."""
        if self.turns is None:
            return any(p.turns for p in self.prompts)
        return self.turns.high > 1

    def body(
        self,
        model: str,
        messages: Sequence[Message],
        max_tokens: int,
        route_extra: Mapping[str, Any] | None = None,
        exact: bool = False,
        api: Api = api_chat.API,
    ) -> bytes:
        """The request body of ``messages`` for ``model`` in ``api``'s form (the same messages go to every fallback
        model); a route's own ``extra_body`` is merged over ``--extra-body``; ``exact``: ask for ``max_tokens``
        exactly."""
        extra = {**(self.extra_body or {}), **route_extra} if route_extra else self.extra_body
        return api.body(model, messages, max_tokens, extra, exact)
