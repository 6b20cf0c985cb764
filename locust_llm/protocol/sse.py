"""Server-sent events: an incremental decoder, the parsing of chat-completion chunks, what every API reads into. Pure.

The decoder follows the WHATWG event-stream rules (a last event without its blank line is dispatched at the end, as
some servers end that way). :class:`TokenShape` learns the bytes around a stream's token, so that later tokens are
read without parsing JSON.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "ANSWER_FIELDS",
    "CONTENT",
    "DONE_CHUNK",
    "EMPTY_CHUNK",
    "LITERAL",
    "REASONING_CHUNK",
    "REASONING_FIELDS",
    "TOKEN_CHUNK",
    "TOKEN_FIELDS",
    "ChatChunk",
    "MalformedChunk",
    "SSEDecoder",
    "SSEEvent",
    "TokenShape",
    "content_json",
    "detail",
    "digits_free",
    "error_chunk",
    "error_message",
    "int_or_none",
    "is_content_literal",
    "parse_chunk",
    "preview_data",
    "reply_text",
    "tool_chunk",
    "typed_event",
]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``data`` is the raw bytes of the joined ``data`` lines."""

    data: bytes
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Incremental SSE decoder: :meth:`feed` any split of a byte stream and get the same events.

    :meth:`feed_line` is the cheaper entry point when the caller already reads line by line (the hot path of the
    streaming user reads with ``readline(b"\\n")``).
    """

    __slots__ = ("_data", "_event", "_id", "_partial", "_pending_cr")

    def __init__(self) -> None:
        self._partial = b""
        self._pending_cr = False
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None

    @property
    def idle(self) -> bool:
        """True between events: no data and no event name pending (a one-line ``data:`` event may then be cut out
        of the bytes directly, see :mod:`locust_llm.http.pump`)."""
        return not self._data and not self._event

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk`` and return the events it completes, in order."""
        events: list[SSEEvent] = []
        if not chunk:
            return events
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith(b"\r")
        buf = self._partial + chunk
        lines = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            event = self.feed_line(line)
            if event is not None:
                events.append(event)
        return events

    def feed_line(self, line: bytes) -> SSEEvent | None:
        """Process one line (a trailing ``\\n``/``\\r\\n`` is allowed) and return the event it dispatches, if any."""
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        elif line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            return self._dispatch()
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
            return None
        if line.startswith(b":"):
            return None
        name, sep, value = line.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self._id = value.decode("utf-8", "replace")
        elif name == b"data":  # a bare "data" line without a colon carries an empty value
            self._data.append(b"")
        return None

    def finish(self) -> list[SSEEvent]:
        """End of stream: process a last unterminated line and dispatch a pending event (see module docstring)."""
        events: list[SSEEvent] = []
        if self._partial:
            event = self.feed_line(self._partial)
            self._partial = b""
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _dispatch(self) -> SSEEvent | None:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data = []
        if not data:
            self._event = ""
            return None
        event = SSEEvent(data, self._event or "message", self._id)
        self._event = ""
        return event


class MalformedChunk(ValueError):
    """A ``data:`` payload that is not a chat-completion chunk (bad JSON or wrong shape)."""


@dataclass(frozen=True, slots=True)
class ChatChunk:
    """What one ``data:`` payload of a chat-completion stream says.

    ``has_token`` is true when any choice's delta carries generated text (``content``, ``reasoning_content``,
    ``reasoning``, or a tool call's ``arguments``); the role-only first chunk (``{"role": "assistant", "content":
    ""}``) has none, nor a tool call's start (its ``id`` and name: ``tool_call``).
    ``reasoning`` is true when that text is only reasoning (``reasoning_content`` or ``reasoning``): an *answer*
    token has ``content`` or ``tool_calls``. The usage chunk's ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens`` are ``cached_tokens`` and ``reasoning_tokens`` (None: not sent).
    """

    has_token: bool = False
    reasoning: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    error: str | None = None
    error_status: int | None = None  # 429 when the error sent inside the stream is a rate limit
    retry_after_s: float | None = None  # the error object's retry_after / retry_after_ms, when it has one
    done: bool = False
    response_id: str | None = None  # the Responses API's id of this response (--conversation-state server)
    tool_call: bool = False  # a tool call's start (its id and name) or its arguments (a token when not empty)
    tool_id: str | None = None
    tool_name: str | None = None
    arguments: str | None = None  # this delta's piece of the tool call's arguments


DONE_CHUNK = ChatChunk(done=True)
EMPTY_CHUNK = ChatChunk()
TOKEN_CHUNK = ChatChunk(has_token=True)
"""What :func:`parse_chunk` returns, this very object, for the usual chunk: one answer token and nothing else."""
REASONING_CHUNK = ChatChunk(has_token=True, reasoning=True)
ANSWER_FIELDS = ("content", "tool_calls")
"""Delta fields that carry answer tokens."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Delta fields that carry reasoning tokens (xAI and vLLM send ``reasoning_content``; newer vLLM ``reasoning``)."""
TOKEN_FIELDS = (*ANSWER_FIELDS, *REASONING_FIELDS)
"""Delta fields that carry generated tokens."""


def parse_chunk(data: bytes) -> ChatChunk:
    """Parse one SSE ``data`` payload of ``/chat/completions`` with ``stream: true``.

    Handles content deltas, ``finish_reason``, the final ``usage`` chunk (``choices: []``), ``[DONE]``, whitespace
    (ignored) and error objects sent inside the stream (``{"error": {"message": ...}}``; a rate limit among them is
    flagged with ``error_status`` 429). Raises :class:`MalformedChunk` otherwise, also for a ``usage`` that is not
    an object.
    """
    if data == b"[DONE]":
        return DONE_CHUNK
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not data.strip():
            return EMPTY_CHUNK
        raise MalformedChunk(f"invalid JSON in stream chunk: {preview_data(data)}") from exc
    if not isinstance(obj, dict):
        raise MalformedChunk(f"stream chunk is not a JSON object: {preview_data(data)}")
    if obj.get("error"):
        return error_chunk(obj["error"])
    choices = obj.get("choices")
    usage = obj.get("usage")
    if choices is None and usage is None:
        raise MalformedChunk(f"stream chunk has neither 'choices' nor 'usage': {preview_data(data)}")
    if usage is not None and not isinstance(usage, dict):
        raise MalformedChunk(f"'usage' is not an object: {preview_data(data)}")
    token, finish_reason = _scan_choices(choices, data)
    if usage:
        return dataclasses.replace(
            token,
            finish_reason=finish_reason,
            prompt_tokens=int_or_none(usage.get("prompt_tokens")),
            completion_tokens=int_or_none(usage.get("completion_tokens")),
            cached_tokens=detail(usage, "prompt_tokens_details", "cached_tokens"),
            reasoning_tokens=detail(usage, "completion_tokens_details", "reasoning_tokens"),
        )
    if finish_reason is None:
        return token
    return dataclasses.replace(token, finish_reason=finish_reason)


def _scan_choices(choices: Any, data: bytes) -> tuple[ChatChunk, str | None]:
    """What the choices' deltas carry (``TOKEN_CHUNK``: an answer token, ``REASONING_CHUNK``, or ``EMPTY_CHUNK``) and
    the finish reason."""
    if not choices:
        return EMPTY_CHUNK, None
    if type(choices) is list and len(choices) == 1 and type(choices[0]) is dict:  # the usual chunk: one choice
        choice = choices[0]
        delta = choice.get("delta")
        token = (TOKEN_CHUNK if delta.get("content") else _other_token(delta)) if type(delta) is dict else EMPTY_CHUNK
        finish = choice.get("finish_reason")
        return token, (str(finish) if finish else None)
    if not isinstance(choices, list):
        raise MalformedChunk(f"'choices' is not a list: {preview_data(data)}")
    token = EMPTY_CHUNK
    finish_reason = None
    for choice in choices:
        if not isinstance(choice, dict):
            raise MalformedChunk(f"a choice is not an object: {preview_data(data)}")
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            kind = TOKEN_CHUNK if delta.get("content") else _other_token(delta)
            if kind is TOKEN_CHUNK or token is EMPTY_CHUNK:  # an answer token in any choice makes the chunk an answer
                token = kind
        if choice.get("finish_reason"):
            finish_reason = str(choice["finish_reason"])
    return token, finish_reason


def _other_token(delta: dict[str, Any]) -> ChatChunk:
    calls = delta.get("tool_calls")
    if calls:
        return _tool_delta(calls)
    return REASONING_CHUNK if any(delta.get(field) for field in REASONING_FIELDS) else EMPTY_CHUNK


def typed_event(data: bytes) -> tuple[dict[str, Any], str] | None:
    """An event of an API that names its events (Responses, Messages): its object and ``type``; None for data of
    whitespace alone. Raises :class:`MalformedChunk` for anything but a JSON object with a string ``type``."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not data.strip():
            return None
        raise MalformedChunk(f"invalid JSON in stream event: {preview_data(data)}") from exc
    kind = obj.get("type") if type(obj) is dict else None
    if type(kind) is not str:
        raise MalformedChunk(f"stream event is not an object with a 'type': {preview_data(data)}")
    return obj, kind


def _tool_delta(calls: Any) -> ChatChunk:
    """A ``tool_calls`` delta: its first call's start (``id``, ``function.name``) and its piece of the arguments."""
    call: dict[str, Any] = calls[0] if isinstance(calls, list) and calls and isinstance(calls[0], dict) else {}
    given = call.get("function")
    function: dict[str, Any] = given if isinstance(given, dict) else {}
    arguments = function.get("arguments")
    return tool_chunk(call.get("id"), function.get("name"), arguments if isinstance(arguments, str) else None)


def tool_chunk(tool_id: Any, name: Any, arguments: str | None) -> ChatChunk:
    """A tool call's start or piece of arguments, in any API: a token when the piece is not empty."""
    return ChatChunk(
        has_token=bool(arguments),
        tool_call=True,
        tool_id=tool_id if isinstance(tool_id, str) else None,
        tool_name=name if isinstance(name, str) else None,
        arguments=arguments or None,
    )


def detail(usage: dict[str, Any], group: str, name: str) -> int | None:
    """``usage[group][name]`` when it is an integer (``prompt_tokens_details.cached_tokens``, ...)."""
    details = usage.get(group)
    return int_or_none(details.get(name)) if isinstance(details, dict) else None


LITERAL = rb'("[^"\\]*(?:\\.[^"\\]*)*")'
"""A JSON string literal, as a regular expression's group."""
CONTENT = re.compile(rb'"delta":\{"content":' + LITERAL)
"""The content's JSON string in the usual compact chunk (``..."delta":{"content":"..."...``)."""


def content_json(data: bytes) -> bytes:
    """The JSON string literal of the first choice's delta ``content`` in a chunk's payload (``b'""'`` if none).

    The per-token half of keeping a reply cheaply (conversations): in the usual compact chunk, as OpenAI, xAI, vLLM
    and llama.cpp send it, the literal is sliced out of the bytes by one regular-expression search; a payload in
    another layout is parsed whole. :func:`reply_text` decodes the slices together at the end of the stream."""
    match = CONTENT.search(data)
    if match is not None:
        return match.group(1)
    obj = orjson.loads(data)
    choices = obj.get("choices") if isinstance(obj, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    delta = first.get("delta") if isinstance(first, dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return orjson.dumps(content if isinstance(content, str) else "")


_DIGITS = re.compile(rb"[0-9]+")
_NUMBERED: dict[tuple[bytes, bytes], re.Pattern[bytes]] = {}


def _numbered(prefix: bytes, suffix: bytes) -> re.Pattern[bytes]:
    """A numbered shape's regular expression, made once per shape with its digits set aside (each stream learns
    one: building it per request would cost a few percent of a request's CPU)."""
    key = (_DIGITS.sub(b"0", prefix), _DIGITS.sub(b"0", suffix))
    regex = _NUMBERED.get(key)
    if regex is None:
        if len(_NUMBERED) >= 64:  # bounded: a stream of shapes that never repeat is kept from growing it
            _NUMBERED.clear()
        regex = _NUMBERED[key] = re.compile(digits_free(prefix) + LITERAL + digits_free(suffix))
    return regex


def digits_free(learned: bytes) -> bytes:
    """``learned`` as a regular expression that matches it with any run of digits in the place of each of its own."""
    return b"[0-9]+".join(re.escape(part) for part in re.split(rb"[0-9]+", learned))


class TokenShape:
    """The usual token chunk of one stream, learned from its first (:meth:`learn`): the bytes before and after the
    content's JSON string, which servers repeat byte for byte from token to token within a stream.

    :meth:`content` then recognises a token chunk without parsing it: a payload that is that prefix, a JSON string
    literal and that suffix is the learned chunk (valid JSON, every field the same) with another string as its
    content. The literal is checked by parsing it alone, and a chunk is recognised only when that string is not
    empty, so for a recognised payload the API's parse returns :data:`TOKEN_CHUNK` and its ``text_json`` the
    literal, as the full parse would; anything else is for the full parse. A ``numbered`` API (the Responses API
    numbers every event) may change any run of digits around the literal: :attr:`regex` matches the learned bytes
    with each such run free (a number with a leading zero, which JSON refuses, would pass: no server sends one)."""

    __slots__ = ("numbered", "pattern", "prefix", "regex", "suffix")

    def __init__(self, pattern: re.Pattern[bytes] = CONTENT, numbered: bool = False) -> None:
        self.pattern = pattern
        """Finds the text literal in a token event (group 1): chat's :data:`CONTENT`, or another API's."""
        self.numbered = numbered
        self.prefix: bytes | None = None
        self.suffix = b""
        self.regex: re.Pattern[bytes] | None = None
        """A numbered shape's: the learned payload with its digit runs free and the literal as group 1."""

    def learn(self, data: bytes) -> None:
        """Learn the shape of ``data``, a payload its API's parse returned :data:`TOKEN_CHUNK` for."""
        match = self.pattern.search(data)
        if match is not None:
            self.prefix, self.suffix = data[: match.start(1)], data[match.end(1) :]
            if self.numbered:
                self.regex = _numbered(self.prefix, self.suffix)

    def content(self, data: bytes) -> bytes | None:
        """The content's JSON string literal when ``data`` is a token chunk of the learned shape, else ``None``."""
        if self.regex is not None:
            match = self.regex.fullmatch(data)
            literal = None if match is None else match.group(1)
            return literal if literal is not None and is_content_literal(literal) else None
        prefix = self.prefix
        if prefix is None or not data.startswith(prefix) or not data.endswith(self.suffix):
            return None
        literal = data[len(prefix) : len(data) - len(self.suffix)]
        return literal if is_content_literal(literal) else None


def is_content_literal(literal: bytes) -> bool:
    """Whether ``literal`` is exactly one JSON string literal of a non-empty string: a quote first and last, and
    valid JSON (a valid literal of at least three bytes has at least one character)."""
    if len(literal) < 3 or literal[0] != 0x22 or literal[-1] != 0x22:
        return False
    try:
        orjson.loads(literal)
    except orjson.JSONDecodeError:
        return False
    return True


def reply_text(slices: list[bytes]) -> str:
    """The answer text from the :func:`content_json` slices of a stream's answer chunks: one JSON parse of their
    array, joined."""
    return "".join(orjson.loads(b"[" + b",".join(slices) + b"]")) if slices else ""


_RATE_LIMIT_WORDS = ("rate_limit", "rate limit", "too_many_requests", "too many requests")


def error_chunk(error: Any) -> ChatChunk:
    """An error object sent inside a stream. A rate limit (code, type or status 429, or "rate limit" in it) gets
    ``error_status`` 429, with its ``retry_after_ms`` / ``retry_after`` (seconds) when given."""
    status = None
    retry_after = None
    if isinstance(error, dict):
        words = " ".join(str(error.get(k, "")) for k in ("code", "type", "message")).lower()
        if any(w in words for w in _RATE_LIMIT_WORDS) or 429 in (error.get("status"), error.get("code")):
            status = 429
        for key, scale in (("retry_after_ms", 0.001), ("retry_after", 1.0)):
            value = error.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf"):
                retry_after = value * scale
                break
    elif "rate limit" in str(error).lower():
        status = 429
    return ChatChunk(error=error_message(error), error_status=status, retry_after_s=retry_after)


def error_message(error: Any) -> str:
    """The text of an error object sent by a server: its message, with its code when it has one."""
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or error
        code = error.get("code")
        return f"{message} (code {code})" if code else str(message)
    return str(error)


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def preview_data(data: bytes, limit: int = 120) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return text + ("..." if len(data) > limit else "")
