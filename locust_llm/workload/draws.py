"""What is drawn per request or per conversation: lengths, turns and think time, with their parsers. Pure."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Length", "PromptError", "ThinkTime", "Turns", "parse_length", "parse_think_time", "parse_turns"]


class PromptError(ValueError):
    """A prompt file or length that cannot be used; one line naming the file, the line and the problem. The flag
    table (:mod:`locust_llm.config.flags`) reports it as a ``ConfigError``."""


@dataclass(frozen=True)
class Length:
    """A length distribution: normal with ``mean`` and ``stddev``, clipped to ``[1, inf)``."""

    mean: int
    stddev: float = 0.0

    def draw(self, rng: random.Random) -> int:
        if self.stddev <= 0:
            return self.mean
        return max(1, round(rng.gauss(self.mean, self.stddev)))


@dataclass(frozen=True)
class Turns:
    """The turns of a conversation: uniform in ``[low, high]``."""

    low: int = 1
    high: int = 1

    def draw(self, rng: random.Random) -> int:
        return self.low if self.low == self.high else rng.randint(self.low, self.high)


def parse_turns(text: str, flag: str = "--turns") -> Turns | None:
    """``auto`` (None), ``N`` or ``MIN:MAX`` (integers, 1 <= MIN <= MAX) -> :class:`Turns`."""
    text = str(text).strip()
    if text == "auto":
        return None
    low, sep, high = text.partition(":")
    try:
        turns = Turns(int(low), int(high) if sep else int(low))
    except ValueError:
        turns = Turns(0, 0)
    if not 1 <= turns.low <= turns.high:
        raise PromptError(f"{flag} must be auto, N or MIN:MAX with integers 1 <= MIN <= MAX, got {text!r}")
    return turns


@dataclass(frozen=True)
class ThinkTime:
    """A pause between the turns of a conversation: ``seconds`` plus a uniform jitter in ``[-jitter, +jitter]``."""

    seconds: float = 0.0
    jitter: float = 0.0

    def draw(self, rng: random.Random) -> float:
        if self.jitter <= 0:
            return self.seconds
        return max(0.0, self.seconds + rng.uniform(-self.jitter, self.jitter))


def parse_think_time(text: str, flag: str = "--think-time") -> ThinkTime:
    """``S`` or ``S:JITTER`` (seconds, JITTER <= S) -> :class:`ThinkTime`."""
    seconds, sep, jitter = str(text).strip().partition(":")
    try:
        think = ThinkTime(float(seconds), float(jitter) if sep else 0.0)
    except ValueError:
        think = ThinkTime(-1.0)
    if not (0 <= think.jitter <= think.seconds < float("inf")):
        raise PromptError(f"{flag} must be SECONDS or SECONDS:JITTER with 0 <= JITTER <= SECONDS, got {text!r}")
    return think


def parse_length(text: str, flag: str) -> Length:
    """``128`` or ``128:32`` (mean:stddev) -> :class:`Length`."""
    mean, sep, std = str(text).strip().partition(":")
    try:
        length = Length(int(mean), float(std) if sep else 0.0)
    except ValueError:
        raise PromptError(f"{flag} must be MEAN or MEAN:STDDEV with an integer mean >= 1, got {text!r}") from None
    if length.mean < 1 or length.stddev < 0:
        raise PromptError(f"{flag} must be MEAN or MEAN:STDDEV with an integer mean >= 1, got {text!r}")
    return length
