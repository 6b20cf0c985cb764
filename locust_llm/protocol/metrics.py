"""What one request measured (:class:`RequestResult`), how it ended (:class:`Outcome`), and its derived metrics. Pure.

All times are integer nanoseconds of ``time.perf_counter_ns()`` in one process: ``TTFT = token_ns[0] - sent_ns``;
``TTFA`` to the first answer token; ``ITL`` every gap; ``E2E = end_ns - sent_ns``; the scheduling lag
``sent_ns - intended_ns`` (a busy generator's delay, which TTFT from the actual send would hide).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ANTHROPIC_RATELIMIT_HEADERS",
    "RATELIMIT_HEADERS",
    "SYSTEMATIC",
    "Outcome",
    "RequestResult",
    "StatusClass",
    "ratelimit_headers",
]

SYSTEMATIC = {
    "http_400": "HTTP 400: the endpoint refuses the request itself (check --model, --max-tokens, the prompts and "
    "--system-prompt against the model's context, and --extra-body)",
    "http_401": "HTTP 401: the endpoint refuses the credentials (check OPENAI_API_KEY or --api-key)",
    "http_403": "HTTP 403: the key may not use this model or endpoint (check the key's permissions and --model)",
    "http_404": "HTTP 404: no such endpoint or model (check --host, the API base URL such as https://api.x.ai/v1, "
    "and --model)",
    "refused": "connection refused (check --host: is the server running and listening there?)",
    "dns": "the host name does not resolve (check --host)",
    "tls": "the TLS handshake failed (an untrusted certificate: trust its CA with --ca-bundle FILE, or for a test "
    "server only --insecure; docs/endpoints.md#https-certificates-and-proxies)",
}
"""Failures that no retry, no other user and no amount of waiting will fix: the run stops on them (see
:mod:`locust_llm.measure.failfast`). Key: ``RequestResult.cause``; value: what it means and what to check."""


class StatusClass(StrEnum):
    """How a request ended, in the per-step CSV's status columns."""

    OK = "ok"
    HTTP_429 = "status_429"
    HTTP_5XX = "status_5xx"
    HTTP_4XX_OTHER = "status_4xx_other"
    TIMEOUT = "timeouts"
    CONNECTION = "conn_errors"
    PROTOCOL = "protocol_errors"


class Outcome(StrEnum):
    """Failure classification of a request; ``status_class`` maps it onto the CSV columns."""

    OK = "ok"
    HTTP_429 = "http_429"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    HTTP_OTHER = "http_other"
    STREAM_ERROR = "stream_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection_error"
    MALFORMED = "malformed_stream"
    EMPTY = "empty_stream"
    TRUNCATED = "truncated_stream"
    NOT_SSE = "not_sse"

    @property
    def status_class(self) -> StatusClass:
        return _STATUS_CLASS[self]

    @classmethod
    def for_http_status(cls, status: int) -> Outcome:
        if status == 429:
            return cls.HTTP_429
        if 400 <= status < 500:
            return cls.HTTP_4XX
        if status >= 500:
            return cls.HTTP_5XX
        return cls.HTTP_OTHER


_STATUS_CLASS = {
    Outcome.OK: StatusClass.OK,
    Outcome.HTTP_429: StatusClass.HTTP_429,
    Outcome.HTTP_4XX: StatusClass.HTTP_4XX_OTHER,
    Outcome.HTTP_5XX: StatusClass.HTTP_5XX,
    Outcome.HTTP_OTHER: StatusClass.PROTOCOL,
    Outcome.STREAM_ERROR: StatusClass.HTTP_5XX,
    Outcome.TIMEOUT: StatusClass.TIMEOUT,
    Outcome.CONNECTION: StatusClass.CONNECTION,
    Outcome.MALFORMED: StatusClass.PROTOCOL,
    Outcome.EMPTY: StatusClass.PROTOCOL,
    Outcome.TRUNCATED: StatusClass.PROTOCOL,
    Outcome.NOT_SSE: StatusClass.PROTOCOL,
}


@dataclass(slots=True)
class RequestResult:
    """One streamed request, as measured by the user. ``error`` is a readable, redacted message."""

    model: str
    intended_ns: int
    sent_ns: int
    end_ns: int = 0
    outcome: Outcome = Outcome.OK
    http_status: int = 0
    error: str = ""
    token_ns: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_tokens: int = 0  # the max_tokens it asked for (0: not known)
    tokens_estimated: bool = False
    finish_reason: str | None = None
    retry_after_s: float | None = None
    stale: bool = False  # failed before any response byte, as a reused keep-alive connection the server closed does
    started_ns: int = 0  # when the attempt began, before a reconnect if there was one (0: at sent_ns)
    cause: str = ""  # a systematic failure's signature (see SYSTEMATIC), e.g. "http_401" or "refused"
    answer_ns: int = 0  # when the first answer token arrived (0: none)
    reasoning_chunks: int = 0  # token chunks that carried reasoning only
    cached_tokens: int = 0  # prompt tokens the server served from its prefix cache (usage)
    reasoning_tokens: int = 0  # completion tokens spent reasoning (usage, or reasoning chunks counted)
    reasoning_estimated: bool = False
    turn: int = 0  # the turn of a conversation this request is (1-based; 0: not a conversation)
    reply: str = ""  # the answer text, kept only for conversations
    response_id: str | None = None  # the Responses API's id of the answer (--conversation-state server chains it)
    tool_calls: int = 0  # tool calls the answer made
    tool_call_chunks: int = 0  # the deltas of their arguments
    tools: list[dict[str, str]] | None = None  # each call's id, name and arguments, kept only for conversations
    no_done: bool = False  # complete without ``data: [DONE]``: a finish_reason came and the body ended cleanly
    wrote: bool = False  # the request was handed to the kernel: the server may have it, whatever happens next
    secondary: bool = False  # sent to another model or route than its client request's primary (fallback, hedge)
    ratelimit: tuple[int | None, ...] | None = (
        None  # x-ratelimit-{limit,remaining}-{requests,tokens} (RATELIMIT_HEADERS)
    )

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def status(self) -> int:
        """The status the client acts on: 429 for a rate limit, also one sent inside a 200 stream; 503 for
        Anthropic's 529 ("overloaded"), which retries and fallbacks treat alike."""
        if self.outcome is Outcome.HTTP_429:
            return 429
        return 503 if self.http_status == 529 else self.http_status

    def fail(self, outcome: Outcome, message: str) -> None:
        """Classify the request as failed; the first failure found wins."""
        if self.outcome is Outcome.OK:
            self.outcome = outcome
            self.error = message

    def fill_token_counts(self, prompt_tokens_estimate: int) -> None:
        """Token counts from the final chunk's usage when the server sent it; else chunks counted as tokens, and the
        prompt estimated, each marked estimated."""
        if not self.completion_tokens and self.token_ns:
            self.completion_tokens = len(self.token_ns)
            self.tokens_estimated = True
        if not self.prompt_tokens and self.token_ns:
            self.prompt_tokens = prompt_tokens_estimate
            self.tokens_estimated = True
        if not self.reasoning_tokens and self.reasoning_chunks:
            self.reasoning_tokens = self.reasoning_chunks
            self.reasoning_estimated = True

    @property
    def ttft_ns(self) -> int | None:
        return self.token_ns[0] - self.sent_ns if self.token_ns else None

    @property
    def answer_ttft_ns(self) -> int | None:
        return self.answer_ns - self.sent_ns if self.answer_ns else None

    @property
    def e2e_ns(self) -> int:
        return self.end_ns - self.sent_ns

    @property
    def lag_ns(self) -> int:
        return max(0, self.sent_ns - self.intended_ns)

    @property
    def tpot_ns(self) -> int | None:
        ttft = self.ttft_ns
        if ttft is None or self.completion_tokens < 2:
            return None
        return (self.e2e_ns - ttft) // (self.completion_tokens - 1)

    def itl_gaps_ns(self) -> list[int]:
        t = self.token_ns
        return [t[i] - t[i - 1] for i in range(1, len(t))]


RATELIMIT_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
)
"""The caps hosted providers (OpenAI, xAI, Azure OpenAI) state in every answer's head, and what is left of them."""
ANTHROPIC_RATELIMIT_HEADERS = (
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
)
"""The same four as the Messages API names them (read where the ``x-ratelimit-*`` one is absent)."""


def ratelimit_headers(header: Callable[[str], Any]) -> tuple[int | None, ...] | None:
    """The :data:`RATELIMIT_HEADERS` of an answer (``header(name)`` gives a value or ``""``/``None``), whole numbers
    or None; None when the answer has none of them."""
    values = []
    for name, other in zip(RATELIMIT_HEADERS, ANTHROPIC_RATELIMIT_HEADERS, strict=True):
        text = header(name) or header(other)
        try:
            values.append(int(float(text)) if text else None)
        except (TypeError, ValueError):
            values.append(None)
    return None if all(v is None for v in values) else tuple(values)
