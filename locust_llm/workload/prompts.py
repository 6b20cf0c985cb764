"""Built-in prompts: short and varied, so that a fresh install has something sensible to send."""

from __future__ import annotations

import random
from typing import Any

import orjson

__all__ = ["BUILTIN_TEMPLATES", "BuiltinPrompts", "chat_body", "estimate_prompt_tokens"]

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


def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Rough prompt size when the server sends no usage: 4 bytes per token, plus 4 per message and 3 per request."""
    return 3 + sum(4 + -(-len(str(m.get("content", "")).encode()) // 4) for m in messages)


def chat_body(model: str, messages: list[dict[str, Any]], max_tokens: int) -> bytes:
    """The JSON body of a streamed chat completion that asks for a final ``usage`` chunk."""
    return orjson.dumps(
        {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


class BuiltinPrompts:
    def __init__(self, model: str, max_tokens: int, rng: random.Random) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.rng = rng

    def next_body(self) -> tuple[bytes, int]:
        """``(body, estimated prompt tokens)`` of the next request."""
        template = self.rng.choice(BUILTIN_TEMPLATES)
        messages = [{"role": "user", "content": template.format(i=self.rng.randrange(1, 10_000))}]
        return chat_body(self.model, messages, self.max_tokens), estimate_prompt_tokens(messages)
