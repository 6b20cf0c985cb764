"""``OpenAISdkUser``: the same measurements through the official ``openai`` client's streaming API.

For users who want to measure exactly what their application's client does. It costs far more CPU per token than
:class:`~locust_llm.users.chat.ChatStreamUser` (a pydantic object per chunk), so give it fewer streams per core;
retries are left to locust-llm's client discipline (``max_retries=0``).
"""

from __future__ import annotations

import functools
import logging
import typing
from collections.abc import Sequence
from typing import Any

import openai
import orjson
from locust import User
from locust.env import Environment
from openai.types.responses import ResponseStreamEvent

from locust_llm.http.attempt import Attempt, FirstToken, end_of_stream
from locust_llm.protocol.api_completions import prompt_text
from locust_llm.protocol.metrics import RequestResult
from locust_llm.protocol.sse import ANSWER_FIELDS, REASONING_FIELDS, parse_chunk
from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.users.base import LLMUserMixin
from locust_llm.workload.prompts import exact_fields

__all__ = ["OpenAISdkUser"]

logger = logging.getLogger("locust_llm")
_warned = False


class OpenAISdkUser(LLMUserMixin, User):
    """Streams with ``openai.OpenAI()``: ``chat.completions.create(stream=True)``, or with ``--api responses``
    ``responses.create(stream=True)`` (``--api completions``: ``completions.create``)."""

    apis = ("chat", "responses", "completions")
    """The ``--api`` values it speaks (the Messages API: locustfile.py's ``ChatStreamUser``)."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.setup_llm(environment)
        global _warned
        if not _warned:
            _warned = True
            logger.warning(
                "OpenAISdkUser: the official SDK costs several times the generator CPU per token of ChatStreamUser: "
                "keep the streams per worker core low (docs/performance.md#the-generator), watch the steps' validity."
            )
        self.client = self._make_client(
            self.host or "", self.config.api_key, dict(self.config.headers), self.config.tls
        )
        if "responses" in {
            self.config.api_of(r).name for r in (self.config.routes.routes if self.config.routes else [None])
        }:
            _build_response_events()
        self.clients: dict[str, tuple[_Client, Any]] = {}  # route -> its own client, and the route
        for route in self.config.routes.routes if self.config.routes else ():
            client = self._make_client(route.base_url, route.api_key, dict(route.headers), route.tls)
            self.clients[route.name] = (client, route)

    def _make_client(self, base_url: str, api_key: str | None, headers: dict[str, str], tls: Any) -> _Client:
        """A client of one endpoint: its key and headers, trust and proxy as ChatStreamUser's
        (locust_llm.config.tls), not httpx's own."""
        proxy = self.llm.proxy(base_url)
        http = openai.DefaultHttpxClient(
            verify=tls.httpx_verify(), trust_env=False, proxy=proxy.url() if proxy else None
        )
        return _Client(
            http_client=http,
            api_key=api_key or "not-needed",
            base_url=base_url.rstrip("/"),
            max_retries=0,
            timeout=self.config.request_timeout_s,
            default_headers={"User-Agent": self.user_agent, **dict(self.config.headers), **headers},
        )

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: FirstToken | None,
    ) -> RequestResult:
        timeout_s, secrets, on_cut = self.config.request_timeout_s, self.config.secrets, self.llm.recorder.record_cut
        client, route = self.clients.get(model) or (self.client, None)
        extra_body = self.workload.extra_body
        if route is not None:  # a route's own model, max_tokens cap and extra body
            extra_body = {**(extra_body or {}), **(route.extra_body or {})}
            max_tokens = min(max_tokens, route.max_tokens or max_tokens)
        if self.exact_lengths(model if route is not None else self.llm.model):
            extra_body = {**exact_fields(max_tokens), **(extra_body or {})}
        sent, chain = self.chained(model, messages) if self.keep_reply else (messages, None)
        tools = self.tool_fields(self.config.api_of(route))
        if chain or tools:
            extra_body = {**(extra_body or {}), **(chain or {}), **(tools or {})}
        with Attempt(model, intended_ns, timeout_s, secrets, on_cut=on_cut) as attempt:
            result = attempt.result
            result.max_tokens = max_tokens
            client.events = None
            result.wrote = True  # the SDK sends it inside create(): counted as sent from there
            try:
                api = self.config.api_of(route).name
                stream = _create(client, api, model if route is None else route.model, sent, max_tokens, extra_body)
                result.http_status = 200
                attempt.header = stream.response.headers.get
                replies: list[str] | None = [] if self.keep_reply else None
                on_chunk = _on_event if api == "responses" else _on_chunk
                ended = False
                for chunk in stream:
                    ended = on_chunk(chunk, attempt.clock(), result, replies, attempt) or ended
                    if on_first_token is not None and result.token_ns:
                        on_first_token()
                        on_first_token = None
                result.end_ns = attempt.clock()
                result.reply = "".join(replies or ())
                attempt.check_not_empty()
                events = client.events
                if api == "responses" and result.token_ns and not ended:
                    end_of_stream(result, "'response.completed'")
                elif api != "responses" and result.token_ns and events is not None and not events.done:
                    end_of_stream(result)
            except openai.APIStatusError as exc:
                response = exc.response
                attempt.header = response.headers.get
                attempt.http_error(exc.status_code, response.reason_phrase, response.text)
            except openai.APITimeoutError:
                attempt.silence()
            except openai.APIConnectionError as exc:
                attempt.connection_error(exc)
            except openai.APIError as exc:  # an error event in the stream (the SDK raises it)
                attempt.stream_error(parse_chunk(orjson.dumps({"error": exc.body or exc.message})))
            except ValueError as exc:  # a chunk the SDK could not decode
                attempt.malformed(str(exc))
            except Exception as exc:  # mid-stream, the SDK lets its HTTP library's transport errors through
                if not _transport_error(exc):
                    raise
                if "Timeout" in type(exc).__name__:
                    attempt.silence()
                else:
                    attempt.connection_error(exc)
        result.fill_token_counts(estimate_prompt_tokens(messages))
        return result


class _DoneWatch:
    """One stream's SSE decoder, noting whether ``data: [DONE]`` came: the SDK stops at it and tells no one."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.done = False

    def iter_bytes(self, iterator: Any) -> Any:
        for event in self.decoder.iter_bytes(iterator):
            if event.data.startswith("[DONE]"):
                self.done = True
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decoder, name)


class _Client(openai.OpenAI):
    """The SDK's client, keeping the SSE decoder of its latest stream (``_make_sse_decoder``, the SDK's own hook;
    without it the stream's end is taken as complete, as the SDK takes it)."""

    events: _DoneWatch | None = None

    def _make_sse_decoder(self) -> Any:
        self.events = _DoneWatch(super()._make_sse_decoder())
        return self.events


@functools.cache
def _build_response_events() -> None:
    """Build the SDK's Responses API event models now, once per process: pydantic builds them on their first use,
    0.3-1 s of CPU that would hold the event loop (and every stream's stamps) in the middle of the first answer."""
    union = ResponseStreamEvent
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    for model in typing.get_args(union):
        model.model_rebuild()
        model.__pydantic_validator__  # noqa: B018  (built on first access)


def _transport_error(exc: Exception) -> bool:
    """An exception of the SDK's HTTP library (httpx or its fork, httpcore)."""
    return type(exc).__module__.split(".")[0].startswith(("httpx", "httpcore"))


def _create(
    client: _Client, api: str, model: str, messages: Sequence[dict[str, Any]], max_tokens: int, extra: Any
) -> Any:
    """The SDK's stream of ``api``, with the body :mod:`locust_llm.protocol` sends (``extra``'s null fields left
    out, as there)."""
    left_out = {key for key, value in (extra or {}).items() if value is None}
    extra_body = {k: v for k, v in (extra or {}).items() if k not in left_out} or None
    if api == "responses":
        store = openai.NOT_GIVEN if "store" in left_out or "store" in (extra_body or {}) else False
        return client.responses.create(
            model=model, input=list(messages), max_output_tokens=max_tokens, stream=True, store=store,  # type: ignore[arg-type]
            extra_body=extra_body,
        )  # fmt: skip
    usage = openai.NOT_GIVEN if "stream_options" in left_out else {"include_usage": True}
    if api == "completions":
        return client.completions.create(  # type: ignore[call-overload]
            model=model, prompt=prompt_text(messages), max_tokens=max_tokens, stream=True, stream_options=usage,
            extra_body=extra_body,
        )  # fmt: skip
    return client.chat.completions.create(  # type: ignore[call-overload]
        model=model, messages=list(messages), max_tokens=max_tokens, stream=True, stream_options=usage,
        extra_body=extra_body,
    )  # fmt: skip


_ANSWER_EVENTS = frozenset({"response.output_text.delta", "response.function_call_arguments.delta"})
_REASONING_EVENTS = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})


def _on_event(event: Any, now: int, result: RequestResult, replies: list[str] | None, attempt: Attempt) -> bool:
    """One Responses API event of the SDK, measured as :mod:`locust_llm.protocol.api_responses` reads it; True at the
    end event."""
    kind = getattr(event, "type", "")
    if kind in _ANSWER_EVENTS and getattr(event, "delta", None):
        result.token_ns.append(now)
        result.answer_ns = result.answer_ns or now
        if replies is not None and kind == "response.output_text.delta":
            replies.append(event.delta)
    elif kind in _REASONING_EVENTS and getattr(event, "delta", None):
        result.token_ns.append(now)
        result.reasoning_chunks += 1
    elif kind == "response.created":
        result.response_id = getattr(event.response, "id", None) or None
    elif kind in ("response.completed", "response.incomplete"):
        response = event.response
        details = getattr(response, "incomplete_details", None)
        result.finish_reason = (getattr(details, "reason", None) or "incomplete") if details else "completed"
        usage = getattr(response, "usage", None)
        if usage is not None:
            result.prompt_tokens = usage.input_tokens or 0
            result.completion_tokens = usage.output_tokens or 0
            result.cached_tokens = _detail(usage, "input_tokens_details", "cached_tokens") or result.cached_tokens
            result.reasoning_tokens = _detail(usage, "output_tokens_details", "reasoning_tokens") or 0
        return True
    elif kind == "response.failed":
        error = getattr(event.response, "error", None)
        body = {"message": getattr(error, "message", "the response failed"), "code": getattr(error, "code", None)}
        attempt.stream_error(parse_chunk(orjson.dumps({"error": body})))
    elif kind == "error":
        body = {"message": getattr(event, "message", ""), "code": getattr(event, "code", None)}
        attempt.stream_error(parse_chunk(orjson.dumps({"error": body})))
    return False


def _on_chunk(
    chunk: Any, now: int, result: RequestResult, replies: list[str] | None, attempt: Attempt | None = None
) -> bool:
    """One SDK chunk (chat, or completions' ``text``), measured as :func:`locust_llm.http.stream.run_stream` measures
    one SSE event."""
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        result.prompt_tokens = usage.prompt_tokens or 0
        result.completion_tokens = usage.completion_tokens or 0
        result.cached_tokens = _detail(usage, "prompt_tokens_details", "cached_tokens") or result.cached_tokens
        result.reasoning_tokens = _detail(usage, "completion_tokens_details", "reasoning_tokens") or 0
    for choice in chunk.choices or ():
        delta = getattr(choice, "delta", None)
        text = getattr(choice, "text", None)  # completions
        if text:
            result.token_ns.append(now)
            result.answer_ns = result.answer_ns or now
            if replies is not None:
                replies.append(text)
        elif delta is not None and any(getattr(delta, f, None) for f in ANSWER_FIELDS):
            result.token_ns.append(now)
            result.answer_ns = result.answer_ns or now
            if replies is not None and isinstance(delta.content, str):
                replies.append(delta.content)
        elif delta is not None and any(getattr(delta, f, None) for f in REASONING_FIELDS):
            result.token_ns.append(now)
            result.reasoning_chunks += 1
        if choice.finish_reason:
            result.finish_reason = choice.finish_reason
    return False


def _detail(usage: Any, group: str, name: str) -> int | None:
    value = getattr(getattr(usage, group, None), name, None)
    return value if isinstance(value, int) else None
