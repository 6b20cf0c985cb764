"""The simulator's legacy completions: a request in chat form, and ``text_completion`` chunks. Pure."""

from __future__ import annotations

import time
from typing import Any

import orjson

from locust_llm.sim.chunks import DONE
from locust_llm.sim.request import BadRequest

__all__ = ["CompletionsFormat", "as_chat"]


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat completion: the ``prompt`` (a string, or strings joined) as one user message."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        prompt = "".join(prompt)
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' is a required property: a string.", "prompt")
    chat: dict[str, Any] = {
        k: body[k] for k in ("model", "stream", "stream_options", "min_tokens", "ignore_eos") if k in body
    }
    chat["messages"] = [{"role": "user", "content": prompt}]
    chat["max_tokens"] = body.get("max_tokens", 16)
    return chat


class CompletionsFormat:
    """The chunks of one completion (``cmpl-sim{seq_id}``), with :class:`~locust_llm.sim.chunks.ChunkFormat`'s
    interface: an empty first chunk, one per token, a finish chunk, the usage when asked for, ``[DONE]``."""

    numbered = False
    __slots__ = ("created", "head", "id", "include_usage", "model", "reasoning_head", "tail")

    def __init__(
        self, seq_id: int, model: str, include_usage: bool, prompt_tokens: int = 0, tool: str | None = None
    ) -> None:
        self.id = f"cmpl-sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        first = self.chunk("", None)
        cut = first.index(b'"text":""') + len(b'"text":')
        self.head = self.reasoning_head = first[:cut]
        self.tail = first[cut + 2 :]

    def chunk(self, text: str | None, finish_reason: str | None, usage: Any = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": []
            if text is None
            else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            obj["usage"] = usage
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def role_chunk(self) -> bytes:
        return self.chunk("", None)

    def final_chunks(
        self,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        done: bool = True,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> bytes:
        out = self.chunk("", finish_reason)
        if not done:
            return out
        if self.include_usage:
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
            }
            out += self.chunk(None, None, usage)
        return out + DONE
