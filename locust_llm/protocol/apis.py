"""The APIs locust-llm speaks, by ``--api`` name (and a route's ``api``). Pure."""

from __future__ import annotations

from locust_llm.protocol import api_chat, api_completions, api_messages, api_responses
from locust_llm.protocol.api import Api

__all__ = ["APIS", "API_NAMES", "api_for"]

APIS: dict[str, Api] = {m.API.name: m.API for m in (api_chat, api_responses, api_messages, api_completions)}
API_NAMES = tuple(APIS)


def api_for(name: str) -> Api:
    """The API called ``name``; ValueError naming the choices for any other."""
    try:
        return APIS[name]
    except KeyError:
        raise ValueError(f"unknown API {name!r}: choose one of {', '.join(API_NAMES)}") from None
