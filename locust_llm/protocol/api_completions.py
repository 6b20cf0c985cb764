"""Legacy completions (``POST {base}/completions``): the messages joined into one ``prompt``, chat's stream with
the text in ``choices[0].text``. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from locust_llm.protocol.api import Api, Message, merged
from locust_llm.protocol.sse import (
    DONE_CHUNK,
    EMPTY_CHUNK,
    LITERAL,
    TOKEN_CHUNK,
    ChatChunk,
    MalformedChunk,
    detail,
    error_chunk,
    int_or_none,
    preview_data,
)
from locust_llm.protocol.tokens import content_text

__all__ = ["API", "TEXT", "completions_body", "parse_chunk", "prompt_text"]

TEXT = re.compile(rb'"text":' + LITERAL)
"""The text's JSON string in the usual compact chunk."""


def prompt_text(messages: Sequence[Message]) -> str:
    return "\n\n".join(content_text(m.get("content")) for m in messages)


def completions_body(
    model: str,
    messages: Sequence[Message],
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt_text(messages),
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return orjson.dumps(merged(body, extra, max_tokens if exact else None))


def parse_chunk(data: bytes) -> ChatChunk:
    """One ``data`` payload: text, ``finish_reason``, ``usage``, ``[DONE]`` or an error object; raises
    :class:`MalformedChunk` otherwise."""
    if data == b"[DONE]":
        return DONE_CHUNK
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not data.strip():
            return EMPTY_CHUNK
        raise MalformedChunk(f"invalid JSON in stream chunk: {preview_data(data)}") from exc
    if type(obj) is not dict:
        raise MalformedChunk(f"stream chunk is not a JSON object: {preview_data(data)}")
    if obj.get("error"):
        return error_chunk(obj["error"])
    choices, usage = obj.get("choices"), obj.get("usage")
    if choices is None and usage is None:
        raise MalformedChunk(f"stream chunk has neither 'choices' nor 'usage': {preview_data(data)}")
    if not isinstance(choices, list | None) or not all(isinstance(c, dict) for c in choices or ()):
        raise MalformedChunk(f"'choices' is not a list of objects: {preview_data(data)}")
    text = any(c.get("text") for c in choices or ())
    finish = next((str(c["finish_reason"]) for c in choices or () if c.get("finish_reason")), None)
    if usage is not None and not isinstance(usage, dict):
        raise MalformedChunk(f"'usage' is not an object: {preview_data(data)}")
    if not usage and finish is None:
        return TOKEN_CHUNK if text else EMPTY_CHUNK
    usage = usage or {}
    return ChatChunk(
        has_token=text,
        finish_reason=finish,
        prompt_tokens=int_or_none(usage.get("prompt_tokens")),
        completion_tokens=int_or_none(usage.get("completion_tokens")),
        cached_tokens=detail(usage, "prompt_tokens_details", "cached_tokens"),
        reasoning_tokens=detail(usage, "completion_tokens_details", "reasoning_tokens"),
    )


def text_json(data: bytes) -> bytes:
    """The first choice's text as a JSON string (``b'""'`` when none)."""
    match = TEXT.search(data)
    if match is not None:
        return match.group(1)
    obj = orjson.loads(data)
    choices = obj.get("choices") if isinstance(obj, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    text = first.get("text") if isinstance(first, dict) else None
    return orjson.dumps(text if isinstance(text, str) else "")


API = Api(
    name="completions",
    path="/completions",
    body=completions_body,
    parse=parse_chunk,
    text_json=text_json,
    token_text=TEXT,
    end="'data: [DONE]'",
)
