"""The interface of every API module (``api_*.py``): :class:`Api`, and the body helpers they share. Pure.

Clients see only this interface, so a fifth API is one module here and one in the simulator (docs/endpoints.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from locust_llm.protocol.sse import ChatChunk

__all__ = ["Api", "Message", "exact_fields", "function_of", "merged"]

Message = dict[str, Any]


def exact_fields(max_tokens: int) -> dict[str, Any]:
    """What asks for ``max_tokens`` exactly (``--output-length exact``): vLLM and SGLang honour ``min_tokens``,
    llama.cpp ``ignore_eos``; both are sent, and ``--extra-body`` may set either to ``null`` to leave it out."""
    return {"min_tokens": max_tokens, "ignore_eos": True}


def function_of(tool: Mapping[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """An OpenAI-format tool's name, description and parameters' schema (an empty object when it has none)."""
    function = tool["function"]
    return function["name"], function.get("description"), function.get("parameters") or {"type": "object"}


def merged(body: dict[str, Any], extra: Mapping[str, Any] | None, exact: int | None) -> dict[str, Any]:
    """``body`` with :func:`exact_fields` (``exact``: the length to pin, or None) and ``extra`` merged in, ``extra``'s
    ``null`` fields left out (``{"stream_options": null}`` for a server that refuses the field)."""
    if exact is not None:
        body.update(exact_fields(exact))
    for key, value in (extra or {}).items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


@dataclass(frozen=True)
class Api:
    """One API (module docstring)."""

    name: str
    """``--api``'s value: chat, responses, messages or completions."""
    path: str
    """Under the base URL (``{host}/responses``)."""
    body: Callable[[str, Sequence[Message], int, Mapping[str, Any] | None, bool], bytes]
    """``body(model, messages, max_tokens, extra, exact)``: the streamed request's JSON."""
    parse: Callable[[bytes], ChatChunk]
    """One event's ``data``; raises :class:`~locust_llm.protocol.sse.MalformedChunk`."""
    text_json: Callable[[bytes], bytes]
    """The JSON string literal of an answer event's text (``b'""'`` when it has none)."""
    token_text: re.Pattern[bytes]
    """Finds the text literal in the usual token event (group 1): the bytes around it are learned once per stream
    (:class:`~locust_llm.protocol.sse.TokenShape`)."""
    end: str
    """The end event, as a failure message names it (``'data: [DONE]'``, ``'response.completed'``)."""
    numbered: bool = False
    """Its events carry numbers that change from token to token (``sequence_number``): the learned token shape
    leaves their digits free (:class:`~locust_llm.protocol.sse.TokenShape`)."""
    token_event: bytes = b""
    """The ``event:`` name of a token event, for APIs that name their events: the single-token read of the pump."""
    tools: Callable[[Sequence[Mapping[str, Any]], bool], dict[str, Any]] | None = None
    """``tools(schemas, required)``: the body fields that offer ``--tools`` (OpenAI's format, converted) and ask for
    a call when ``required``; None: the API has no tools."""
    key_header: tuple[str, str] = ("Authorization", "Bearer ")
    """The header that carries the key, and what comes before the key in it."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers every request of the API carries (the Messages API's ``anthropic-version``)."""

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The API's own headers and, with ``key``, the one that carries it."""
        out = dict(self.headers)
        if key:
            name, before = self.key_header
            out[name] = before + key
        return out
