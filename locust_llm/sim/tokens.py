"""The simulator's output tokens: deterministic words, pre-encoded as JSON strings. Pure.

Prompt tokens are counted with :func:`locust_llm.tokens.estimate_prompt_tokens`, the estimate the client uses too.
"""

from __future__ import annotations

__all__ = ["TOKEN_JSON", "token_id", "token_text"]

_WORDS = tuple(
    " " + w
    for w in (
        "the of and to in is that for it as with was on be by this are or from at which an have not they but "
        "can all one their more has been will there when what so if about would out up into some them time "
        "only other new these two may then first any like now such over our even most after also many before "
        "must through back years where much your way well down should because each just those people how too"
    ).split()
)


TOKEN_JSON = tuple(('"' + w + '"').encode() for w in _WORDS)
"""Each word as a JSON string literal (plain ASCII words need no escaping)."""


def token_id(seed: int, seq_id: int, index: int) -> int:
    """Which word token ``index`` of sequence ``seq_id`` is: deterministic for ``seed``."""
    return (seed * 7919 + seq_id * 2_654_435_761 + index * 40_503) % len(_WORDS)


def token_text(seed: int, seq_id: int, index: int) -> str:
    return _WORDS[token_id(seed, seq_id, index)]
