"""The simulator's Messages API: a request in chat form (``anthropic-version`` required), and Anthropic's events,
the cache's read in ``message_delta``'s usage. Pure."""

from __future__ import annotations

import time
from typing import Any

import orjson

from locust_llm.protocol.tokens import content_text
from locust_llm.sim.request import BadRequest

__all__ = ["MessagesFormat", "as_chat"]


def as_chat(body: dict[str, Any], version: str | None) -> dict[str, Any]:
    """The request as a chat completion: ``system`` (a string or text blocks) first. Raises :class:`BadRequest`."""
    if not version:
        raise BadRequest("anthropic-version: header is required", "anthropic-version")
    if not isinstance(body.get("max_tokens"), int):
        raise BadRequest("max_tokens: Field required", "max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages: Field required", "messages")
    system = body.get("system")
    if isinstance(system, list):  # blocks: marked ones stay marked, for --prefix-cache hint
        marked = [b for b in system if isinstance(b, dict) and "cache_control" in b]
        head: dict[str, Any] = {"role": "system", "content": content_text(system)}
        if marked:
            head["cache_control"] = marked[0]["cache_control"]
        messages = [head, *messages]
    elif isinstance(system, str):
        messages = [{"role": "system", "content": system}, *messages]
    chat: dict[str, Any] = {
        k: body[k] for k in ("model", "stream", "max_tokens", "min_tokens", "ignore_eos") if k in body
    }
    chat["messages"] = messages
    chat["stream_options"] = {"include_usage": True}
    return chat


def _event(obj: dict[str, Any]) -> bytes:
    kind: str = obj["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


class MessagesFormat:
    """The events of one message (``msg_sim{seq_id}``), with :class:`~locust_llm.sim.chunks.ChunkFormat`'s
    interface; ``message_start`` states ``prompt_tokens``."""

    numbered = False
    __slots__ = ("created", "head", "message_id", "model", "prompt_tokens", "reasoning_head", "tail")

    def __init__(self, seq_id: int, model: str, include_usage: bool = True, prompt_tokens: int = 0) -> None:
        self.message_id = f"msg_sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.prompt_tokens = prompt_tokens
        delta = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
        self.head = delta + b'{"type":"text_delta","text":'
        self.reasoning_head = delta + b'{"type":"thinking_delta","thinking":'
        self.tail = b"}}\n\n"

    def role_chunk(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "usage": {"input_tokens": self.prompt_tokens, "cache_read_input_tokens": 0, "output_tokens": 1},
        }
        return _event({"type": "message_start", "message": message}) + _event(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        )

    def final_chunks(
        self,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        done: bool = True,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> bytes:
        """The block's end, ``message_delta`` with the usage and, unless ``done`` is False, ``message_stop``."""
        usage = {
            "input_tokens": prompt_tokens - cached_tokens,
            "cache_read_input_tokens": cached_tokens,
            "output_tokens": completion_tokens,
        }
        reason = "max_tokens" if finish_reason == "length" else "end_turn"
        out = _event({"type": "content_block_stop", "index": 0}) + _event(
            {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": usage}
        )
        return out + _event({"type": "message_stop"}) if done else out
