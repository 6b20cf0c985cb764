"""The Responses API (``POST {base}/responses``), xAI's and OpenAI's primary endpoint. Pure.

Sends ``input``, ``max_output_tokens`` and ``store: false``. Tokens are ``*.delta`` events; the end and the usage
come in ``response.completed`` (or ``.incomplete``); ``response.failed`` and ``error`` are errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from locust_llm.protocol.api import Api, Message, function_of, merged
from locust_llm.protocol.sse import (
    EMPTY_CHUNK,
    LITERAL,
    REASONING_CHUNK,
    TOKEN_CHUNK,
    ChatChunk,
    MalformedChunk,
    detail,
    error_chunk,
    int_or_none,
    preview_data,
    tool_chunk,
    typed_event,
)

__all__ = ["API", "DELTA", "parse_event", "responses_body"]

DELTA = re.compile(rb'"delta":' + LITERAL)
"""The text's JSON string in a delta event."""

_ANSWER = frozenset({"response.output_text.delta"})
_REASONING = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
_END = frozenset({"response.completed", "response.incomplete"})


def responses_body(
    model: str,
    messages: Sequence[Message],
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "input": [item for m in messages for item in _items(m)],
        "max_output_tokens": max_tokens,
        "stream": True,
        "store": False,
    }
    return orjson.dumps(merged(body, extra, max_tokens if exact else None))


def _items(message: Message) -> list[dict[str, Any]]:
    """A chat-format message as input items: a tool call as a ``function_call``, its result as a
    ``function_call_output``, any other message as it is."""
    if message.get("role") == "tool":
        return [{"type": "function_call_output", "call_id": message["tool_call_id"], "output": message["content"]}]
    calls = message.get("tool_calls")
    if not calls:
        return [dict(message)]
    said = [{"role": "assistant", "content": message["content"]}] if message.get("content") else []
    return said + [
        {
            "type": "function_call",
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
        }
        for call in calls
    ]


def responses_tools(tools: Sequence[Mapping[str, Any]], required: bool) -> dict[str, Any]:
    converted = []
    for tool in tools:
        name, description, parameters = function_of(tool)
        described = {"description": description} if description else {}
        converted.append({"type": "function", "name": name, **described, "parameters": parameters})
    return {"tools": converted, "tool_choice": "required" if required else "auto"}


def parse_event(data: bytes) -> ChatChunk:
    """One event's data (module docstring); raises :class:`MalformedChunk` for data that is not a JSON object with a
    string ``type``."""
    typed = typed_event(data)
    if typed is None:
        return EMPTY_CHUNK
    obj, kind = typed
    if kind in _ANSWER:
        return TOKEN_CHUNK if obj.get("delta") else EMPTY_CHUNK
    if kind == "response.function_call_arguments.delta":
        delta = obj.get("delta")
        return tool_chunk(None, None, delta if isinstance(delta, str) else None)
    if kind == "response.output_item.added":
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            return tool_chunk(item.get("call_id"), item.get("name"), None)
        return EMPTY_CHUNK
    if kind in _REASONING:
        return REASONING_CHUNK if obj.get("delta") else EMPTY_CHUNK
    if kind in _END:
        return _end(obj, kind, data)
    if kind == "response.created":
        response = obj.get("response")
        given = response.get("id") if isinstance(response, dict) else None
        return ChatChunk(response_id=given) if isinstance(given, str) and given else EMPTY_CHUNK
    if kind == "response.failed":
        response = obj.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        return error_chunk(error or "the response failed")
    if kind == "error":
        return error_chunk(obj.get("error") if isinstance(obj.get("error"), dict) else obj)
    return EMPTY_CHUNK


def _end(obj: dict[str, Any], kind: str, data: bytes) -> ChatChunk:
    """``response.completed`` or ``response.incomplete``: the end, its reason and the usage."""
    response = obj.get("response")
    if not isinstance(response, dict):
        raise MalformedChunk(f"'{kind}' without a 'response' object: {preview_data(data)}")
    reason = "completed"
    if kind == "response.incomplete":
        details = response.get("incomplete_details")
        reason = str(details.get("reason") or "incomplete") if isinstance(details, dict) else "incomplete"
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return ChatChunk(finish_reason=reason, done=True)
    return ChatChunk(
        finish_reason=reason,
        prompt_tokens=int_or_none(usage.get("input_tokens")),
        completion_tokens=int_or_none(usage.get("output_tokens")),
        cached_tokens=detail(usage, "input_tokens_details", "cached_tokens"),
        reasoning_tokens=detail(usage, "output_tokens_details", "reasoning_tokens"),
        done=True,
    )


def text_json(data: bytes) -> bytes:
    """The answer text's JSON string in an ``output_text`` delta (``b'""'`` in any other event)."""
    if b'"response.output_text.delta"' not in data:
        return b'""'
    match = DELTA.search(data)
    if match is not None:
        return match.group(1)
    delta = orjson.loads(data).get("delta")
    return orjson.dumps(delta if isinstance(delta, str) else "")


API = Api(
    name="responses",
    path="/responses",
    body=responses_body,
    parse=parse_event,
    text_json=text_json,
    token_text=DELTA,
    end="'response.completed'",
    token_event=b"response.output_text.delta",
    numbered=True,
    tools=responses_tools,
)
