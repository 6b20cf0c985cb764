"""The simulator's wire format: OpenAI chat-completion chunks, HTTP/1.1 chunk framing, error bodies. Pure.

A streamed answer is, each as an SSE ``data:`` event: a role chunk (``{"role": "assistant", "content": ""}``), one
content chunk per token, a finish chunk (``finish_reason``), a ``usage`` chunk with ``choices: []`` when the request
asked for ``stream_options.include_usage``, and ``data: [DONE]``. Content chunks share the role chunk's bytes
around the content value (:attr:`ChunkFormat.head`, :attr:`ChunkFormat.tail`), so a token costs one concatenation.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = ["DONE", "FINGERPRINT", "ChunkFormat", "completion_body", "error_body", "frame", "usage"]

FINGERPRINT = "fp_locust_llm_sim"
DONE = b"data: [DONE]\n\n"


def frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (``Transfer-Encoding: chunked``)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip


class ChunkFormat:
    """The chunks of one completion (``chatcmpl-sim{seq_id}``)."""

    __slots__ = ("completion_id", "created", "head", "include_usage", "model", "tail")

    def __init__(self, seq_id: int, model: str, include_usage: bool) -> None:
        self.completion_id = f"chatcmpl-sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        role = self.role_chunk()
        cut = role.index(b'"content":""') + len(b'"content":')
        self.head = role[:cut].replace(b'"role":"assistant",', b"")
        """A content chunk's bytes before the JSON string of its token."""
        self.tail = role[cut + 2 :]
        """A content chunk's bytes after the JSON string of its token."""

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
        return self.chunk({"role": "assistant", "content": ""}, None)

    def token_chunk(self, token_json: bytes) -> bytes:
        return self.head + token_json + self.tail

    def final_chunks(self, finish_reason: str, prompt_tokens: int, completion_tokens: int, done: bool = True) -> bytes:
        """The finish chunk, the usage chunk (when asked for) and, unless ``done`` is False, ``[DONE]``."""
        out = self.chunk({}, finish_reason)
        if not done:
            return out
        if self.include_usage:
            out += self.chunk(None, None, usage(prompt_tokens, completion_tokens))
        return out + DONE


def completion_body(fmt: ChunkFormat, text: str, prompt_tokens: int, completion_tokens: int) -> bytes:
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
            "usage": usage(prompt_tokens, completion_tokens),
        }
    )


def error_body(message: str, err_type: str, code: str | None = None, param: str | None = None) -> bytes:
    """An OpenAI-style error object."""
    return orjson.dumps({"error": {"message": message, "type": err_type, "param": param, "code": code}})
