"""What the simulator says of itself, as real servers do: ``/v1/models``, ``/props`` and ``/metrics``.

Names and labels are vLLM's and llama.cpp's own, so a run reads the simulator as it reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from locust_llm import __version__
from locust_llm.sim.presets import ModelSpec

__all__ = ["VLLM_METRICS", "cache_config", "metrics", "models", "props"]

VLLM_METRICS = (
    ("vllm:kv_cache_usage_perc", "gauge", "kv_usage", "KV-cache usage. 1 means 100 percent usage."),
    ("vllm:num_requests_running", "gauge", "running", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "gauge", "waiting", "Number of requests waiting to be processed."),
    ("vllm:num_preemptions", "counter", "preemptions", "Cumulative number of preemptions from the engine."),
)
"""The families the simulator's ``/metrics`` serves: (name, type, gauge of ``ModelRuntime.gauges``, help)."""


def models(contexts: Mapping[str, int]) -> dict[str, Any]:
    """``/v1/models``: each model with its context as ``max_model_len`` (vLLM's field)."""
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "locust-llm-sim", "max_model_len": context}
        for name, context in contexts.items()
    ]
    return {"object": "list", "data": data}


def metrics(gauges: Mapping[str, Mapping[str, float | None]], omit: tuple[str, ...]) -> list[str]:
    """The gauges of each model (``ModelRuntime.gauges``) as Prometheus lines, one sample per model; ``omit``'s
    gauges left out (a server without them)."""
    lines = []
    for metric, kind, gauge, text in VLLM_METRICS:
        if gauge in omit:
            continue
        samples = [(name, values.get(gauge)) for name, values in gauges.items()]
        present = [(name, value) for name, value in samples if value is not None]
        if present:
            lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
            suffix = "_total" if kind == "counter" else ""
            lines += [f'{metric}{suffix}{{model_name="{name}"}} {value:g}' for name, value in present]
    return lines


def props(spec: ModelSpec) -> dict[str, Any]:
    """``/props`` of the first model: its slots (a batching engine's ``max_batch``, a pacing engine's capacity) over
    its replicas, its context, its name and the simulator's version."""
    slots = spec.batch.max_batch if spec.engine == "batching" else spec.pacing.capacity
    return {
        "total_slots": slots * spec.replicas,
        "default_generation_settings": {"n_ctx": spec.context_tokens},
        "model_path": spec.name,
        "build_info": f"locust-llm-sim {__version__}",
    }


def cache_config(specs: Mapping[str, ModelSpec], prefix_mode: str) -> list[str]:
    """``vllm:cache_config_info`` lines of each batching model: its KV blocks per replica, their size, its prefix
    cache."""
    lines = []
    for name, spec in specs.items():
        if spec.engine != "batching":
            continue
        caching = prefix_mode != "off"
        labels = (
            f'block_size="{spec.batch.block_tokens}",cache_dtype="auto",enable_prefix_caching="{caching}",'
            f'model_name="{name}",num_gpu_blocks="{spec.batch.kv_blocks}"'
        )
        lines.append(f"vllm:cache_config_info{{{labels}}} 1")
    return ["# TYPE vllm:cache_config_info gauge", *lines] if lines else []
