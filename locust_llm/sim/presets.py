"""The simulator's configuration: served models, their engines and limits, presets, and fault injection. Pure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from locust_llm.sim.batching import BatchParams
from locust_llm.sim.engine import PacingParams
from locust_llm.sim.faults import FaultPlan
from locust_llm.sim.limits import LimitParams

__all__ = ["PRESETS", "ModelSpec", "SimConfig", "apply_overrides", "parse_decode_table", "preset"]


@dataclass(frozen=True)
class ModelSpec:
    """One served model: its engine (``batching`` or ``pacing``), per-key limits and replicas.

    Each replica is an independent engine; a request goes to the replica with the least work. Output lengths are
    drawn per request, uniformly in ``[output_fraction * max_tokens, max_tokens]`` (1.0 = always ``max_tokens``).
    A reasoning model (``reasoning_tokens`` > 0) streams its first ``min(reasoning_tokens, output - 1)`` tokens as
    ``reasoning_content``: they are generated tokens like any other (KV, step time, usage), the answer follows.
    """

    name: str
    engine: str = "batching"
    batch: BatchParams = field(default_factory=BatchParams)
    pacing: PacingParams = field(default_factory=PacingParams)
    limits: LimitParams = field(default_factory=LimitParams)
    replicas: int = 1
    context_tokens: int = 8192
    output_fraction: float = 1.0
    overload_queue: int | None = None
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        if self.engine not in ("batching", "pacing"):
            raise ValueError(f"engine must be batching or pacing, got {self.engine!r}")
        if self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")
        if not 0.0 < self.output_fraction <= 1.0:
            raise ValueError(f"output fraction must be within (0, 1], got {self.output_fraction}")
        if self.context_tokens < 1:
            raise ValueError("context_tokens must be >= 1")
        if self.overload_queue is not None and self.overload_queue < 0:
            raise ValueError("overload_queue must be >= 0")
        if self.reasoning_tokens < 0:
            raise ValueError(f"reasoning_tokens must be >= 0, got {self.reasoning_tokens}")
        if self.engine == "batching":
            usable = self.batch.usable_blocks * self.batch.block_tokens
            if self.context_tokens > usable:
                raise ValueError(
                    f"{self.name}: a context of {self.context_tokens} tokens does not fit the KV cache "
                    f"({usable} usable tokens): lower --context-tokens or raise --kv-blocks"
                )


@dataclass(frozen=True)
class SimConfig:
    models: tuple[ModelSpec, ...]
    seed: int = 0
    faults: FaultPlan = field(default_factory=FaultPlan)
    close_after_response: bool = False
    close_delay_s: float = 0.0
    stall_s: float = 600.0
    metrics_omit: tuple[str, ...] = ()  # gauges /metrics leaves out (a server without them: TGI has no KV gauge)
    min_tokens: str = "honour"  # min_tokens and ignore_eos: honour (vLLM), ignore (no effect) or reject (HTTP 400)

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("at least one model is needed")
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, got {names}")

    @property
    def default_model(self) -> str:
        return self.models[0].name


def parse_decode_table(text: str) -> tuple[tuple[int, float], ...]:
    """``8:12,16:14,32:17`` -> ((8, 12.0), (16, 14.0), (32, 17.0)): batches up to 8 take 12 ms per step, ..."""
    table = []
    for part in text.split(","):
        bound, sep, ms = part.strip().partition(":")
        try:
            table.append((int(bound), float(ms)))
        except ValueError:
            raise ValueError(f"decode table entries are BATCH:MS like 8:12,16:14; got {text!r}") from None
        if not sep:
            raise ValueError(f"decode table entries are BATCH:MS like 8:12,16:14; got {text!r}")
    return tuple(table)


# Presets. Their knees (for the built-in prompts, ~30 prompt tokens, --max-tokens 128) are in
# docs/simulator.md, "Presets".
_DEFAULT_TABLE = ((8, 12.0), (16, 14.0), (32, 17.0), (64, 20.0), (128, 26.0), (256, 40.0))


def _default() -> tuple[ModelSpec, ...]:
    main = ModelSpec(
        "sim-llm",
        batch=BatchParams(kv_blocks=176, decode_table=_DEFAULT_TABLE, prefill_ms_per_1k=25.0),
        limits=LimitParams(max_concurrent=100, retry_after_s=1.0),
        context_tokens=2048,
        output_fraction=0.5,
    )
    mini = dataclasses.replace(
        main,
        name="sim-llm-mini",
        batch=dataclasses.replace(
            main.batch, kv_blocks=160, decode_table=tuple((b, ms * 0.6) for b, ms in _DEFAULT_TABLE)
        ),
        limits=LimitParams(max_concurrent=64, retry_after_s=1.0),
    )
    return main, mini


def _grok_like() -> tuple[ModelSpec, ...]:
    table = ((16, 10.0), (32, 11.0), (64, 13.0), (128, 17.0), (256, 24.0), (512, 38.0))
    main = ModelSpec(
        "grok-sim",
        batch=BatchParams(kv_blocks=8192, max_batch=512, decode_table=table, prefill_ms_per_1k=8.0),
        limits=LimitParams(max_concurrent=48, tpm=2_000_000, retry_after_s=2.0),
        context_tokens=32_768,
        output_fraction=0.5,
    )
    mini = dataclasses.replace(main, name="grok-sim-mini", limits=LimitParams(max_concurrent=96, retry_after_s=1.0))
    return main, mini


def _small_gpu() -> tuple[ModelSpec, ...]:
    table = ((1, 25.0), (2, 26.0), (4, 28.0), (8, 32.0), (16, 40.0))
    return (
        ModelSpec(
            "sim-small",
            batch=BatchParams(kv_blocks=96, max_batch=16, decode_table=table, prefill_ms_per_1k=60.0),
            context_tokens=1024,
            output_fraction=0.5,
            overload_queue=64,
        ),
    )


def _reasoning() -> tuple[ModelSpec, ...]:
    main = _default()[0]
    return (dataclasses.replace(main, name="sim-reasoner", reasoning_tokens=48, output_fraction=1.0),)


def _slots() -> tuple[ModelSpec, ...]:
    """llama.cpp's shape: a fixed number of slots (8), each busy slot slowing decode (one CPU thread, a small GPU),
    and a KV cache that never fills. TTFT rises smoothly with the batch, then jumps once requests wait for a slot."""
    table = ((1, 20.0), (2, 22.0), (4, 26.0), (8, 34.0))
    batch = BatchParams(kv_blocks=8192, max_batch=8, decode_table=table, prefill_ms_per_1k=40.0)
    return (ModelSpec("sim-slots", batch=batch, context_tokens=4096, output_fraction=1.0),)


def _pacing() -> tuple[ModelSpec, ...]:
    return (ModelSpec("sim-llm", engine="pacing", pacing=PacingParams(ttft_ms=200, itl_ms=20, capacity=32)),)


PRESETS = {
    "default": (_default, "sim-llm (KV knee ~32 users, 100 concurrent requests per key) + sim-llm-mini"),
    "grok-like": (_grok_like, "grok-sim: large KV cache; the wall is the provider cap of 48 concurrent requests"),
    "small-gpu": (_small_gpu, "sim-small: one small GPU, knee ~16 users (its batch limit), 503 beyond 64 queued"),
    "pacing": (_pacing, "sim-llm: fixed TTFT 200 ms / ITL 20 ms, 32 at once, FIFO queue"),
    "slots": (_slots, "sim-slots: 8 slots (--max-batch), decode slower with each busy slot, a cache that never fills"),
    "reasoning": (
        _reasoning,
        "sim-reasoner: the default engine, thinking 48 tokens (reasoning_content) before each "
        "answer; set with --reasoning-tokens",
    ),
}


def preset(name: str) -> tuple[ModelSpec, ...]:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    return PRESETS[name][0]()


_BATCH_KEYS = {f.name for f in dataclasses.fields(BatchParams)}
_PACING_KEYS = {"ttft_ms", "itl_ms", "capacity"}
_LIMIT_KEYS = {"max_concurrent", "tpm", "retry_after_s"}
_MODEL_KEYS = {"engine", "replicas", "context_tokens", "output_fraction", "overload_queue", "name", "reasoning_tokens"}


def apply_overrides(spec: ModelSpec, overrides: dict[str, Any]) -> ModelSpec:
    """A copy of ``spec`` with ``overrides`` (engine, batching, pacing, limit or model fields by name)."""
    batch: dict[str, Any] = {}
    pacing: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    model: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in _BATCH_KEYS:
            batch[key] = value
        elif key in _PACING_KEYS:
            pacing[key] = value
        elif key in _LIMIT_KEYS:
            limits[key] = value
        elif key in _MODEL_KEYS:
            model[key] = value
        else:
            allowed = sorted(_BATCH_KEYS | _PACING_KEYS | _LIMIT_KEYS | _MODEL_KEYS)
            raise ValueError(f"unknown model setting {key!r}; allowed: {', '.join(allowed)}")
    new_batch = dataclasses.replace(spec.batch, **batch)
    if "context_tokens" not in model:  # a smaller cache shrinks the context with it, unless it was set
        model["context_tokens"] = min(spec.context_tokens, new_batch.usable_blocks * new_batch.block_tokens)
    return dataclasses.replace(
        spec,
        batch=new_batch,
        pacing=dataclasses.replace(spec.pacing, **pacing),
        limits=dataclasses.replace(spec.limits, **limits),
        **model,
    )
