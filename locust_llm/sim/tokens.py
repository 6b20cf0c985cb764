"""Token arithmetic of the simulator: a cheap, deterministic stand-in for a tokenizer."""

from __future__ import annotations

from typing import Any

__all__ = ["BYTES_PER_TOKEN", "TOKEN_JSON", "count_text_tokens", "prompt_tokens", "token_id", "token_text"]

BYTES_PER_TOKEN = 4
"""Prompt tokens are estimated as ``ceil(utf8_bytes / 4)`` per message, plus 4 per message and 3 per request."""

_WORDS = tuple(
    " " + w
    for w in [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "it",
        "as",
        "with",
        "was",
        "on",
        "be",
        "by",
        "this",
        "are",
        "or",
        "from",
        "at",
        "which",
        "an",
        "have",
        "not",
        "they",
        "but",
        "can",
        "all",
        "one",
        "their",
        "more",
        "has",
        "been",
        "will",
        "there",
        "when",
        "what",
        "so",
        "if",
        "about",
        "would",
        "out",
        "up",
        "into",
        "some",
        "them",
        "time",
        "only",
        "other",
        "new",
        "these",
        "two",
        "may",
        "then",
        "first",
        "any",
        "like",
        "now",
        "such",
        "over",
        "our",
        "even",
        "most",
        "after",
        "also",
        "many",
        "before",
        "must",
        "through",
        "back",
        "years",
        "where",
        "much",
        "your",
        "way",
        "well",
        "down",
        "should",
        "because",
        "each",
        "just",
        "those",
        "people",
        "how",
        "too",
    ]
)


def count_text_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: [{"type": "text", "text": "..."}]
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Estimated prompt tokens of a chat request (see :data:`BYTES_PER_TOKEN`)."""
    return 3 + sum(4 + count_text_tokens(_content_text(m.get("content"))) for m in messages)


TOKEN_JSON = tuple(('"' + w + '"').encode() for w in _WORDS)
"""Each word as a JSON string literal (plain ASCII words need no escaping)."""


def token_id(seed: int, seq_id: int, index: int) -> int:
    """Which word token ``index`` of sequence ``seq_id`` is: deterministic for ``seed``."""
    return (seed * 7919 + seq_id * 2_654_435_761 + index * 40_503) % len(_WORDS)


def token_text(seed: int, seq_id: int, index: int) -> str:
    return _WORDS[token_id(seed, seq_id, index)]
