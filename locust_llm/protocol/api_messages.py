"""Anthropic's Messages API (``POST {base}/messages``), as gateways serve it. Pure.

Key in ``x-api-key``; system messages become ``system``. Prompt tokens = ``input_tokens`` + the cache's read and
creation; text and tool-input deltas are answer tokens, ``thinking_delta`` reasoning; ``message_stop`` ends it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from locust_llm.protocol.api import Api, Message, function_of, merged
from locust_llm.protocol.sse import (
    DONE_CHUNK,
    EMPTY_CHUNK,
    LITERAL,
    REASONING_CHUNK,
    TOKEN_CHUNK,
    ChatChunk,
    MalformedChunk,
    error_chunk,
    int_or_none,
    preview_data,
    tool_chunk,
    typed_event,
)
from locust_llm.protocol.tokens import content_text

__all__ = ["ANTHROPIC_VERSION", "API", "TEXT", "messages_body", "parse_event"]

ANTHROPIC_VERSION = "2023-06-01"
TEXT = re.compile(rb'"text_delta","text":' + LITERAL)
"""The text's JSON string in a ``text_delta``."""


def messages_body(
    model: str,
    messages: Sequence[Message],
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> bytes:
    system = [m for m in messages if m.get("role") == "system"]
    body: dict[str, Any] = {
        "model": model,
        "messages": _turns([m for m in messages if m.get("role") != "system"]),
        "max_tokens": max_tokens,
        "stream": True,
    }
    if system:
        if any("cache_control" in m for m in system):
            body["system"] = [_block(m) for m in system]
        else:
            body["system"] = "\n\n".join(content_text(m.get("content")) for m in system)
    return orjson.dumps(merged(body, extra, max_tokens if exact else None))


def _turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat-format messages as the Messages API's: a tool call as a ``tool_use`` block, and the tool messages after
    it as one user message of ``tool_result`` blocks."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool":
            result = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
        elif message.get("tool_calls"):
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": message["content"]}] if message.get("content") else []
            )
            for call in message["tool_calls"]:
                function = call["function"]
                blocks.append(
                    {"type": "tool_use", "id": call["id"], "name": function["name"], "input": _input(function)}
                )
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append(dict(message))
    return out


def _input(function: Mapping[str, Any]) -> Any:
    """A tool call's arguments as the object the Messages API's ``input`` is (``{}`` when they are not JSON)."""
    try:
        value = orjson.loads(function.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def messages_tools(tools: Sequence[Mapping[str, Any]], required: bool) -> dict[str, Any]:
    converted = []
    for tool in tools:
        name, description, parameters = function_of(tool)
        converted.append(
            {"name": name, **({"description": description} if description else {}), "input_schema": parameters}
        )
    return {"tools": converted, "tool_choice": {"type": "any" if required else "auto"}}


def _block(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": content_text(message.get("content"))}
    if "cache_control" in message:
        block["cache_control"] = message["cache_control"]
    return block


def parse_event(data: bytes) -> ChatChunk:
    """One event's data (module docstring); raises :class:`MalformedChunk` for data that is not a JSON object with a
    string ``type``."""
    typed = typed_event(data)
    if typed is None:
        return EMPTY_CHUNK
    obj, kind = typed
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if type(delta) is not dict:
            raise MalformedChunk(f"'content_block_delta' without a 'delta' object: {preview_data(data)}")
        delta_type = delta.get("type")
        if delta_type == "text_delta":
            return TOKEN_CHUNK if delta.get("text") else EMPTY_CHUNK
        if delta_type == "input_json_delta":
            piece = delta.get("partial_json")
            return tool_chunk(None, None, piece if isinstance(piece, str) else None)
        return REASONING_CHUNK if delta_type == "thinking_delta" and delta.get("thinking") else EMPTY_CHUNK
    if kind == "content_block_start":
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return tool_chunk(block.get("id"), block.get("name"), None)
        return EMPTY_CHUNK
    if kind == "message_start":
        message = obj.get("message")
        return _usage(message.get("usage") if isinstance(message, dict) else None, None)
    if kind == "message_delta":
        delta = obj.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        return _usage(obj.get("usage"), str(reason) if reason else None)
    if kind == "message_stop":
        return DONE_CHUNK
    if kind == "error":
        error = obj.get("error")
        if isinstance(error, dict) and error.get("type") == "rate_limit_error":
            error = {**error, "status": 429}
        return error_chunk(error or obj)
    return EMPTY_CHUNK


def _usage(usage: Any, reason: str | None) -> ChatChunk:
    """A ``usage`` object's counts: the prompt's only when ``input_tokens`` is in it (``message_start``; a
    ``message_delta`` may repeat them)."""
    if not isinstance(usage, dict):
        return ChatChunk(finish_reason=reason) if reason else EMPTY_CHUNK
    prompt = cached = None
    read = int_or_none(usage.get("cache_read_input_tokens"))
    fresh = int_or_none(usage.get("input_tokens"))
    if fresh is not None:
        made = int_or_none(usage.get("cache_creation_input_tokens"))
        prompt, cached = fresh + (read or 0) + (made or 0), read or 0
    completion = int_or_none(usage.get("output_tokens")) if reason is not None else None  # message_start's: 1
    return ChatChunk(finish_reason=reason, prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion)


def text_json(data: bytes) -> bytes:
    """The answer text's JSON string in a ``text_delta`` (``b'""'`` in any other event)."""
    match = TEXT.search(data)
    if match is not None:
        return match.group(1)
    obj = orjson.loads(data)
    delta = obj.get("delta") if isinstance(obj, dict) else None
    text = delta.get("text") if isinstance(delta, dict) and delta.get("type") == "text_delta" else None
    return orjson.dumps(text if isinstance(text, str) else "")


API = Api(
    name="messages",
    path="/messages",
    body=messages_body,
    parse=parse_event,
    text_json=text_json,
    token_text=TEXT,
    end="'message_stop'",
    token_event=b"content_block_delta",
    tools=messages_tools,
    key_header=("x-api-key", ""),
    headers=(("anthropic-version", ANTHROPIC_VERSION),),
)
