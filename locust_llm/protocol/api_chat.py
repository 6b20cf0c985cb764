"""Chat completions (``POST {base}/chat/completions``): the body asks for a final ``usage`` chunk; the stream's
parsing is :func:`~.sse.parse_chunk`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from locust_llm.protocol.api import Api, Message, merged
from locust_llm.protocol.sse import CONTENT, content_json, parse_chunk

__all__ = ["API", "chat_body"]


def chat_body(
    model: str,
    messages: Sequence[Message],
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
    exact: bool = False,
) -> bytes:
    """The JSON body of a streamed chat completion that asks for a final ``usage`` chunk (``exact``: for
    ``max_tokens`` exactly; ``extra`` merged in, :func:`~.api.merged`)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return orjson.dumps(merged(body, extra, max_tokens if exact else None))


def chat_tools(tools: Sequence[Mapping[str, Any]], required: bool) -> dict[str, Any]:
    return {"tools": list(tools), "tool_choice": "required" if required else "auto"}


API = Api(
    name="chat",
    path="/chat/completions",
    body=chat_body,
    parse=parse_chunk,
    text_json=content_json,
    token_text=CONTENT,
    end="'data: [DONE]'",
    tools=chat_tools,
)
