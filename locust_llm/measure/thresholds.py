"""Every threshold a verdict uses, defined once, each documented where it is set. Pure constants.

The sweep, the search, the summary and the diagnosis read them from here, so they cannot drift apart; their values
and flags: docs/methodology.md, "Thresholds". The gate's are flags (``reports.compare.Thresholds``).
"""

from __future__ import annotations

__all__ = [
    "BACKLOG_Z",
    "BORDERLINE",
    "CAP_SHARE",
    "DEFAULT_MAX_ERROR_RATE",
    "ERROR_ALPHA",
    "ERROR_BUDGET",
    "ITL_RISE",
    "KNEE_AGREEMENT",
    "KNEE_STEPS",
    "KV_FULL",
    "MAX_E2E_SHARE",
    "MIN_RISE",
    "MIN_SCRAPES",
    "OUTPUT_SHORT",
    "QUEUE",
    "QUEUE_SHARE",
    "SATURATION_MARGIN",
    "SATURATION_SHARE",
    "UNBALANCED",
]

MIN_RISE = 0.5
"""The least rise of a TTFT p99 (50 %) that can be a knee: a smaller one is noise, whatever its shape."""

KNEE_STEPS = 4
"""Decode steps (ITL p50) a TTFT p99 must rise by before it can be a knee: alone, a user's TTFT is its prefill (2 ms
on the default simulator); with two, a request waits for the current decode step (24 ms). A queue waits for whole
requests, many steps."""

KNEE_AGREEMENT = 0.8
"""A knee found by fewer than this share of its bootstrap resamples is printed as uncertain, with its bracket."""

SATURATION_SHARE = 0.85
"""Throughput saturation: the lowest step at this share of the peak ..."""

SATURATION_MARGIN = 0.15
"""... that no later step exceeds by more than this share."""

CAP_SHARE = 0.01
"""The provider cap: the first step where more than this share of attempts were answered HTTP 429."""

KV_FULL = 0.90
"""KV-cache usage at which the cache counts as full (vLLM keeps a few blocks free)."""

QUEUE = 2.0
QUEUE_SHARE = 0.25
"""A queue: more than ``QUEUE`` requests waiting at the p50 and at least ``QUEUE_SHARE`` of those running. Past a
server's capacity a closed loop's extra users wait (at twice the knee, as many as run); one or two waiting at a step
boundary, at a batch's size, are no queue: a request that arrives during an engine step waits for the next (the
simulator at 3 users, far below its knee: one waiting at half of a step's scrapes, two at times)."""

UNBALANCED = 0.75
"""A queue is one replica's when it holds more than this share of the waiting (median over the scrapes). Sent at
random, four requests waiting on two replicas split 3:1 or 4:0 five times in eight: 0.75 is no evidence."""

MIN_SCRAPES = 3
"""The diagnosis is sure of a gauge only at a step whose steady window held this many scrapes of the server's metrics
(their median is then not one sample)."""

ITL_RISE = 0.10
"""Decode slowing as the batch grows: ITL p50 up by more than this share from the knee's step to the next."""

BORDERLINE = 0.10
"""A search probe is too close to call (run again once) when its judged value lies within this share of its limit."""

DEFAULT_MAX_ERROR_RATE = 0.01
"""An SLA that sets a latency limit but no error limit allows this share of failed client requests."""

BACKLOG_Z = 3.0
"""An open-loop step's backlog grows when its in-flight count rose by more than this many ``sqrt(2 L)``."""

OUTPUT_SHORT = 0.90
"""A step whose successful requests got less than this share of the output tokens they asked for
(``output_tokens_ratio``) is named in the summary: the model stopped early, so the step offered less decode load than
planned."""

ERROR_BUDGET = 0.01
"""``--error-budget``'s default: the share of client requests that may fail other than with HTTP 429 before a step is
past capacity."""

ERROR_ALPHA = 0.05
"""A step is over the error budget only when a binomial test of its failures against the budget says so at this level
(one stray failure among fifty requests is no evidence)."""

MAX_E2E_SHARE = 1.0
"""A step is too short when its E2E p50 exceeds this share of its steady window."""
