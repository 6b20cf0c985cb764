"""Parsing and validating one ``POST /v1/chat/completions`` body, answered as OpenAI's API answers. Pure.

It also counts the prompt's tokens and lists the prefixes a cache may hold (``lookups``, longest first).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from locust_llm.protocol.tokens import estimate_prompt_tokens, message_tokens
from locust_llm.sim.prefix import cache_prefix, chain_keys

__all__ = ["BadRequest", "ChatRequest", "parse_chat_request"]


class BadRequest(Exception):
    """A request the API refuses: HTTP ``status`` with an ``invalid_request_error`` body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    stream: bool
    include_usage: bool
    prompt_tokens: int
    prefix_key: str | None
    prefix_tokens: int
    lookups: tuple[tuple[str, int], ...] = ()
    history: tuple[str, int] | None = None  # (key, tokens) of the whole request, in auto mode
    inserts: tuple[tuple[str, int], ...] = ()  # auto mode: every message boundary's key, with its message's tokens
    min_tokens: int = 0  # the output it must reach: min_tokens, or all of max_tokens with ignore_eos (when honoured)
    tool: str | None = None  # the tool it must call (tools and tool_choice "required", or one named): its answer


def parse_chat_request(
    raw: bytes, contexts: Mapping[str, int], prefix_mode: str = "auto", min_tokens_mode: str = "honour"
) -> ChatRequest:
    """The request in ``raw``; ``contexts`` maps each served model to its context size; ``min_tokens_mode`` how
    ``min_tokens`` and ``ignore_eos`` are taken (:func:`_min_tokens`). Raises :class:`BadRequest`."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadRequest("We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    chat = _parse(body, contexts, prefix_mode)
    tool = _tool(body)
    if tool is not None:
        chat = dataclasses.replace(chat, tool=tool)
    if "min_tokens" not in body and "ignore_eos" not in body:
        return chat
    minimum = _min_tokens(body, chat.max_tokens, min_tokens_mode)
    return dataclasses.replace(chat, min_tokens=minimum) if minimum else chat


def _tool(body: dict[str, Any]) -> str | None:
    """The tool a request makes its answer call: the one ``tool_choice`` names, or the first of ``tools`` when it is
    ``required``; None when the model may answer in words (``auto``, ``none``, no tools). Raises
    :class:`BadRequest` for tools that are not a list of functions."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not tools:
        return None
    names = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    if not names or not all(isinstance(n, str) and n for n in names):
        raise BadRequest("Invalid 'tools': each must be {'type': 'function', 'function': {'name': ...}}.", "tools")
    if isinstance(choice, dict):
        named = choice.get("function", {}).get("name") if isinstance(choice.get("function"), dict) else None
        return named if named in names else names[0]
    return names[0] if choice == "required" else None


def _min_tokens(body: dict[str, Any], max_tokens: int, mode: str) -> int:
    """The output a request must reach: ``honour`` as vLLM (``ignore_eos`` runs to ``max_tokens``), ``ignore`` none,
    ``reject`` an HTTP 400 naming the field, as OpenAI answers an argument it does not know."""
    given = [name for name in ("min_tokens", "ignore_eos") if name in body]
    if not given or mode == "ignore":
        return 0
    if mode == "reject":
        raise BadRequest(f"Unrecognized request argument supplied: {given[0]}", given[0])
    minimum, ignore_eos = body.get("min_tokens", 0), body.get("ignore_eos", False)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 0:
        raise BadRequest(f"Invalid 'min_tokens': must be an integer >= 0, got {minimum!r}.", "min_tokens")
    if not isinstance(ignore_eos, bool):
        raise BadRequest(f"Invalid 'ignore_eos': must be a boolean, got {ignore_eos!r}.", "ignore_eos")
    return max_tokens if ignore_eos else min(minimum, max_tokens)


def _parse(body: dict[str, Any], contexts: Mapping[str, int], prefix_mode: str) -> ChatRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("'messages' is a required property and must be a non-empty array of objects.", "messages")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is a required property.", "model")
    if model not in contexts:
        raise BadRequest(
            f"The model '{model}' does not exist or you do not have access to it.", "model", 404, "model_not_found"
        )
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 16))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest(f"Invalid 'max_tokens': must be an integer >= 1, got {max_tokens!r}.", "max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("Invalid 'stream': must be a boolean.", "stream")
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    context = contexts[model]
    n_prompt = estimate_prompt_tokens(messages)
    if n_prompt + max_tokens > context:
        raise BadRequest(
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
            "messages",
            400,
            "context_length_exceeded",
        )
    if prefix_mode == "off":
        return ChatRequest(model, messages, max_tokens, stream, include_usage, n_prompt, None, 0)
    keys = chain_keys(messages)
    tokens = list(itertools.accumulate(message_tokens(m) for m in messages))
    shared = len(cache_prefix(messages, prefix_mode))
    key, prefix_tokens = (keys[shared - 1], tokens[shared - 1]) if shared else (None, 0)
    if prefix_mode == "hint":
        marked: tuple[tuple[str, int], ...] = ((key, prefix_tokens),) if key is not None else ()
        return ChatRequest(model, messages, max_tokens, stream, include_usage, n_prompt, key, prefix_tokens, marked)
    lookups = tuple((keys[j], tokens[j]) for j in range(len(messages) - 2, -1, -1))
    return ChatRequest(
        model,
        messages,
        max_tokens,
        stream,
        include_usage,
        n_prompt,
        key,
        prefix_tokens,
        lookups,
        (keys[-1], tokens[-1]),
        tuple((key, message_tokens(m)) for key, m in zip(keys, messages, strict=True)),
    )
