"""Provider-style rate limits per API key: a concurrency cap and tokens per minute, with ``Retry-After``. Pure.

Over ``max_concurrent`` requests in flight a request is refused (429, ``Retry-After = retry_after_s``); a token bucket
of ``tpm`` refilled at ``tpm / 60`` per second charges ``prompt_tokens + max_tokens`` on admission and tells a refused
request when it will hold enough. A client that comes back before its ``Retry-After`` is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LimitParams", "RateLimiter", "Rejection"]

NS = 1_000_000_000


@dataclass(frozen=True)
class LimitParams:
    max_concurrent: int | None = None
    tpm: int | None = None
    retry_after_s: float = 1.0

    def __post_init__(self) -> None:
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        if self.tpm is not None and self.tpm < 1:
            raise ValueError(f"tpm must be >= 1, got {self.tpm}")
        if self.retry_after_s < 0:
            raise ValueError("retry_after_s must be >= 0")


@dataclass(frozen=True)
class Rejection:
    reason: str  # "concurrency" or "tpm"
    retry_after_s: float
    message: str


@dataclass
class _Bucket:
    tokens: float
    updated_ns: int


@dataclass
class RateLimiter:
    params: LimitParams = field(default_factory=LimitParams)
    accepted: int = 0
    rejected_concurrency: int = 0
    rejected_tpm: int = 0
    early_returns: int = 0

    def __post_init__(self) -> None:
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._not_before: dict[tuple[str, str], int] = {}

    def in_flight(self, key: str) -> int:
        return self._in_flight.get(key, 0)

    def acquire(self, key: str, client: str, cost_tokens: int, now_ns: int) -> Rejection | None:
        """Admit one request of ``key`` costing ``cost_tokens`` (then call :meth:`release`), or refuse it."""
        not_before = self._not_before.get((key, client))
        if not_before is not None:
            if now_ns < not_before:
                self.early_returns += 1
            else:
                del self._not_before[(key, client)]
        rejection = self._check(key, cost_tokens, now_ns)
        if rejection is not None:
            self._not_before[(key, client)] = now_ns + int(rejection.retry_after_s * NS)
            return rejection
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        self.accepted += 1
        return None

    def headers(self, key: str) -> dict[str, str]:
        """The caps of ``key`` and what is left of them, as OpenAI and xAI state them in every answer's head
        (``x-ratelimit-limit-requests`` the concurrency cap here, ``...-tokens`` the TPM bucket); none without caps."""
        p, out = self.params, {}
        if p.max_concurrent is not None:
            out["x-ratelimit-limit-requests"] = str(p.max_concurrent)
            out["x-ratelimit-remaining-requests"] = str(max(0, p.max_concurrent - self._in_flight.get(key, 0)))
        if p.tpm is not None:
            bucket = self._buckets.get(key)
            out["x-ratelimit-limit-tokens"] = str(p.tpm)
            out["x-ratelimit-remaining-tokens"] = str(p.tpm if bucket is None else max(0, int(bucket.tokens)))
        return out

    def release(self, key: str) -> None:
        n = self._in_flight.get(key, 0)
        if n <= 1:
            self._in_flight.pop(key, None)
        else:
            self._in_flight[key] = n - 1

    def _check(self, key: str, cost: int, now_ns: int) -> Rejection | None:
        p = self.params
        if p.max_concurrent is not None and self._in_flight.get(key, 0) >= p.max_concurrent:
            self.rejected_concurrency += 1
            return Rejection(
                "concurrency",
                p.retry_after_s,
                f"Rate limit reached: at most {p.max_concurrent} concurrent requests per API key. "
                f"Please try again in {p.retry_after_s:g}s.",
            )
        if p.tpm is None:
            return None
        rate = p.tpm / 60.0
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(p.tpm), now_ns)
        bucket.tokens = min(float(p.tpm), bucket.tokens + (now_ns - bucket.updated_ns) / NS * rate)
        bucket.updated_ns = now_ns
        if bucket.tokens >= cost:
            bucket.tokens -= cost
            return None
        self.rejected_tpm += 1
        wait = round((cost - bucket.tokens) / rate + 0.0005, 3) if cost <= p.tpm else 60.0
        return Rejection(
            "tpm",
            wait,
            f"Rate limit reached for tokens per min (TPM): limit {p.tpm}, used {p.tpm - int(bucket.tokens)}, "
            f"requested {cost}. Please try again in {wait:g}s.",
        )
