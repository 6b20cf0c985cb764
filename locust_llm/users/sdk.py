"""``OpenAISdkUser``: the same measurements through the official ``openai`` client's streaming API.

For users who want to measure exactly what their application's client does. It is far more expensive per token
than :class:`~locust_llm.users.chat.ChatStreamUser` (the SDK builds a pydantic object per chunk), so a generator
core sustains far fewer concurrent streams with it (see README); the per-step CPU check marks steps invalid when
the generator saturates. Locust runs the sync client under gevent; retries are left to locust-llm's own client
discipline (``max_retries=0`` in the SDK).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent
import openai
from locust import User, task
from locust.env import Environment

from locust_llm.metrics import Outcome, RequestResult
from locust_llm.redact import redact
from locust_llm.users.chat import LLMUserMixin
from locust_llm.users.discipline import retry_after_s
from locust_llm.workload.prompts import estimate_prompt_tokens

__all__ = ["OpenAISdkUser"]

logger = logging.getLogger("locust_llm")
_warned = False

_TOKEN_FIELDS = ("content", "reasoning_content", "reasoning", "tool_calls")


class OpenAISdkUser(LLMUserMixin, User):
    """Streams chat completions with ``openai.OpenAI().chat.completions.create(stream=True)``."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.setup_llm(environment)
        global _warned
        if not _warned:
            _warned = True
            logger.warning(
                "OpenAISdkUser: the official SDK costs several times the generator CPU per token of ChatStreamUser; "
                "keep the streams per worker core low (see README) and watch the steps' validity."
            )
        headers = {"User-Agent": self.user_agent, **dict(self.config.headers)}
        self.client = openai.OpenAI(
            api_key=self.config.api_key or "not-needed",
            base_url=(self.host or "").rstrip("/"),
            max_retries=0,
            timeout=self.config.request_timeout_s,
            default_headers=headers,
        )

    @task
    def chat(self) -> None:
        self.chat_once()

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: Callable[[], None] | None,
    ) -> RequestResult:
        result = RequestResult(model=model, intended_ns=intended_ns, sent_ns=time.perf_counter_ns())
        deadline = gevent.Timeout(self.config.request_timeout_s)
        deadline.start()
        secrets = self.config.secrets
        try:
            stream = self.client.chat.completions.create(  # type: ignore[call-overload]
                model=model,
                messages=list(messages),
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                extra_body=self.workload.extra_body,
            )
            result.http_status = 200
            for chunk in stream:
                now = time.perf_counter_ns()
                self._on_chunk(chunk, now, result)
                if on_first_token is not None and result.token_ns:
                    on_first_token()
                    on_first_token = None
            result.end_ns = time.perf_counter_ns()
            if not result.token_ns:
                result.fail(Outcome.EMPTY, "empty stream: HTTP 200 but no generated tokens")
        except gevent.Timeout as exc:
            if exc is not deadline:
                raise
            result.fail(Outcome.TIMEOUT, f"timeout: no complete answer within {self.config.request_timeout_s:g} s")
        except openai.APIStatusError as exc:
            result.http_status = exc.status_code
            body = redact(" ".join(str(exc.message).split()), secrets)[:300]
            result.fail(Outcome.for_http_status(exc.status_code), f"HTTP {exc.status_code}: {body}")
            headers = exc.response.headers
            result.retry_after_s = retry_after_s(headers.get("retry-after-ms"), headers.get("retry-after"), time.time())
        except openai.APITimeoutError:
            result.fail(Outcome.TIMEOUT, "timeout: the server sent nothing for too long")
        except openai.APIConnectionError as exc:
            result.fail(Outcome.CONNECTION, redact(f"connection error: {exc}", secrets))
        except (openai.APIError, ValueError) as exc:  # a malformed chunk the SDK could not decode
            result.fail(Outcome.MALFORMED, redact(f"malformed stream: {exc}", secrets)[:300])
        finally:
            deadline.close()
            if not result.end_ns:
                result.end_ns = time.perf_counter_ns()
        result.settle_tokens(estimate_prompt_tokens(messages))
        return result

    @staticmethod
    def _on_chunk(chunk: Any, now: int, result: RequestResult) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            result.prompt_tokens = usage.prompt_tokens or 0
            result.completion_tokens = usage.completion_tokens or 0
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None and any(getattr(delta, f, None) for f in _TOKEN_FIELDS):
                result.token_ns.append(now)
            if choice.finish_reason:
                result.finish_reason = choice.finish_reason
