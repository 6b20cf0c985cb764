"""The simulator's output tokens: deterministic words, pre-encoded as JSON strings. Pure."""

from __future__ import annotations

import math

__all__ = ["TOKEN_JSON", "token_id", "token_text", "token_texts"]

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


_STEP = 40_503 % len(_WORDS)
_PERIOD = len(_WORDS) // math.gcd(_STEP, len(_WORDS))
"""Token ``index + _PERIOD`` of a sequence is the same word as token ``index`` (:func:`token_id` steps by
``_STEP`` modulo the vocabulary)."""


def _tour(first: int) -> tuple[str, list[int]]:
    """One period of the words of a sequence whose token 0 is word ``first``, and where each token starts in it."""
    words = [_WORDS[(first + i * _STEP) % len(_WORDS)] for i in range(_PERIOD)]
    offsets = [0]
    for word in words:
        offsets.append(offsets[-1] + len(word))
    return "".join(words), offsets


_TOURS = [_tour(first) for first in range(len(_WORDS))]


def token_texts(seed: int, seq_id: int, start: int, end: int) -> str:
    """``"".join(token_text(seed, seq_id, i) for i in range(start, end))``, sliced from a repeated period of the
    sequence's words instead of one call per token."""
    if end <= start:
        return ""
    text, offsets = _TOURS[token_id(seed, seq_id, 0)]
    skipped = start // _PERIOD  # whole periods before start
    a = offsets[start % _PERIOD]
    rounds, rest = divmod(end - skipped * _PERIOD, _PERIOD)
    b = rounds * len(text) + offsets[rest]
    return (text * -(-b // len(text)))[a:b]
