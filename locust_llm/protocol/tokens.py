"""The token-count estimate shared by the client and the simulator. Pure.

``ceil(utf8_bytes / 4)`` tokens per message's text, plus 4 per message and 3 per request: a stand-in for a BPE
tokenizer on English text. The client uses it when a server sends no ``usage`` (marked estimated); the simulator uses
it as its tokenizer, so both agree exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BYTES_PER_TOKEN", "content_text", "count_text_tokens", "estimate_prompt_tokens", "message_tokens"]

BYTES_PER_TOKEN = 4


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or multi-part ``[{"type": "text", "text": ...}, ...]``."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def count_text_tokens(text: str) -> int:
    """``ceil(len(utf8(text)) / 4)``."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def message_tokens(message: Mapping[str, Any]) -> int:
    """One message's share of a prompt: ``4 + count_text_tokens(text(message))``."""
    return 4 + count_text_tokens(content_text(message.get("content")))


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """``3 + sum(message_tokens(m) for m in messages)`` (see the module docstring)."""
    return 3 + sum(message_tokens(m) for m in messages)
