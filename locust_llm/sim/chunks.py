"""The simulator's wire format: OpenAI chat-completion chunks, HTTP/1.1 chunk framing, error bodies. Pure.

A streamed answer is a role chunk, one chunk per token (``reasoning_content`` first for a reasoning model), a finish
chunk, a ``usage`` chunk when asked for, and ``data: [DONE]``. Token chunks share the role chunk's bytes around the
token, so a token costs one concatenation.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = [
    "DONE",
    "FINGERPRINT",
    "ChunkFormat",
    "completion_body",
    "error_body",
    "frame",
    "named_event",
    "tool_call_id",
    "usage",
]

FINGERPRINT = "fp_locust_llm_sim"
DONE = b"data: [DONE]\n\n"


def frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (``Transfer-Encoding: chunked``)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def usage(
    prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, reasoning_tokens: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


class ChunkFormat:
    """The chunks of one completion (``chatcmpl-sim{seq_id}``)."""

    numbered = False  # a token's chunk ends with its tail (the Responses API's end with a number: serve_responses)
    __slots__ = ("completion_id", "created", "head", "include_usage", "model", "reasoning_head", "tail", "tool")

    def __init__(
        self, seq_id: int, model: str, include_usage: bool, prompt_tokens: int = 0, tool: str | None = None
    ) -> None:
        self.completion_id = f"chatcmpl-sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.tool = tool
        """The tool the answer calls (its tokens are the call's arguments), or None."""
        role = self.chunk({"role": "assistant", "content": ""}, None)
        cut = role.index(b'"content":""') + len(b'"content":')
        self.head = role[:cut].replace(b'"role":"assistant",', b"")
        """A content chunk's bytes before the JSON string of its token."""
        self.reasoning_head = self.head.replace(b'"content":', b'"reasoning_content":')
        """A reasoning chunk's bytes before the JSON string of its token."""
        self.tail = role[cut + 2 :]
        """A content chunk's bytes after the JSON string of its token."""
        if tool is not None:
            piece = self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}, None)
            cut = piece.index(b'"arguments":""') + len(b'"arguments":')
            self.head, self.tail = piece[:cut], piece[cut + 2 :]

    def chunk(self, delta: dict[str, Any] | None, finish_reason: str | None, usage: Any = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            obj["usage"] = usage
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def role_chunk(self) -> bytes:
        """The answer's first chunk (and, for a tool call, the call's start: its id and the tool's name)."""
        role = self.chunk({"role": "assistant", "content": ""}, None)
        if self.tool is None:
            return role
        call = {"index": 0, "id": tool_call_id(self.completion_id), "type": "function"}
        return role + self.chunk({"tool_calls": [{**call, "function": {"name": self.tool, "arguments": ""}}]}, None)

    def final_chunks(
        self,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        done: bool = True,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> bytes:
        """The finish chunk, the usage chunk (when asked for) and, unless ``done`` is False, ``[DONE]``."""
        out = self.chunk({}, "tool_calls" if self.tool is not None else finish_reason)
        if not done:
            return out
        if self.include_usage:
            out += self.chunk(None, None, usage(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens))
        return out + DONE


def named_event(obj: dict[str, Any]) -> bytes:
    """An SSE event named by its data's ``type`` (``event: TYPE``, then the data), as the Responses and Messages
    APIs send them."""
    kind: str = obj["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def tool_call_id(answer_id: str) -> str:
    """The id of the tool call an answer makes (``call_`` and the answer's own id's digits)."""
    return "call_" + answer_id.rsplit("sim", 1)[-1]


def completion_body(
    fmt: ChunkFormat, text: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> bytes:
    """A non-streamed ``chat.completion``."""
    return orjson.dumps(
        {
            "id": fmt.completion_id,
            "object": "chat.completion",
            "created": fmt.created,
            "model": fmt.model,
            "system_fingerprint": FINGERPRINT,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "length",
                }
            ],
            "usage": usage(prompt_tokens, completion_tokens, cached_tokens),
        }
    )


def error_body(message: str, err_type: str, code: str | None = None, param: str | None = None) -> bytes:
    """An OpenAI-style error object."""
    return orjson.dumps({"error": {"message": message, "type": err_type, "param": param, "code": code}})
