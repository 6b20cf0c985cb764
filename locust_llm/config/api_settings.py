"""What a run's API asks of its settings: the key each API reads, tools, and where a conversation's state lives.

Each check is one :class:`~locust_llm.config.parsers.ConfigError` line naming the flags that conflict. Pure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from locust_llm.config.parsers import ConfigError
from locust_llm.config.routes import Routes

__all__ = ["api_key_from", "conversation_state_from", "tools_from"]

Values = Mapping[str, Any]


def tools_from(v: Values) -> tuple[dict[str, Any], ...]:
    """``--tools``, checked against the flags that need it or that it cannot work with."""
    tools: tuple[dict[str, Any], ...] = v["tools"] or ()
    if v["tool_call_share"] is not None and not tools:
        raise ConfigError("--tool-call-share asks for calls of the tools --tools gives, got it without --tools")
    if tools and v["api"] == "completions":
        raise ConfigError("--tools: the legacy completions API has no tools; use --api chat, responses or messages")
    if v["tool_call_share"] is not None and (v["rates"] or v["trace"]):
        raise ConfigError(
            "--tool-call-share applies to closed-loop users (--steps or --search), got it with "
            + ("--rates" if v["rates"] else "--trace")
        )
    return tools


def conversation_state_from(v: Values, routes: Routes | None) -> str:
    """``--conversation-state``; ``server`` only where every request speaks the Responses API."""
    state: str = v["conversation_state"]
    apis = {r.api or v["api"] for r in routes.routes} if routes is not None else {v["api"]}
    if state == "server" and apis != {"responses"}:
        raise ConfigError(
            "--conversation-state server chains answers by previous_response_id, which only the Responses API has: "
            f"give --api responses (every route's api too), got --api {', '.join(sorted(apis))}"
        )
    if state == "server" and (v["rates"] or v["trace"]):
        raise ConfigError(
            "--conversation-state server applies to closed-loop conversations (--turns); an open loop's sessions "
            f"resend their history, got it with {'--rates' if v['rates'] else '--trace'}"
        )
    return state


def api_key_from(v: Values) -> str | None:
    """``--api-key`` (or ``OPENAI_API_KEY``); for ``--api messages`` without one, ``ANTHROPIC_API_KEY``."""
    given: str | None = v["api_key"]
    if given or v["api"] != "messages":
        return given
    return os.environ.get("ANTHROPIC_API_KEY") or None
