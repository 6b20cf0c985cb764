"""What was measured: the target's fingerprint (``summary.json`` ``target``) and what changed between two. Pure.

Only what the server says of itself; a field no endpoint gave is absent. :func:`changes` names the differences that
move a capacity (model, engine version, KV size, slots, replicas); a field one side lacks is unknown, not a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["WATCHED", "changes", "fingerprint"]

WATCHED: tuple[tuple[str, str], ...] = (
    ("model.id", "model"),
    ("llama_cpp.model_path", "model file"),
    ("tgi.model_id", "model"),
    ("sglang.model_path", "model"),
    ("model.max_model_len", "max_model_len"),
    ("server", "Server header"),
    ("llama_cpp.build_info", "llama.cpp build"),
    ("tgi.version", "TGI version"),
    ("sglang.version", "SGLang version"),
    ("vllm.num_gpu_blocks", "KV blocks"),
    ("vllm.block_size", "KV block size"),
    ("vllm.cache_dtype", "KV dtype"),
    ("vllm.enable_prefix_caching", "prefix caching"),
    ("llama_cpp.n_ctx", "context (n_ctx)"),
    ("llama_cpp.total_slots", "slots"),
    ("tgi.max_batch_total_tokens", "batch tokens"),
    ("tgi.max_concurrent_requests", "concurrent requests"),
    ("sglang.max_total_num_tokens", "KV tokens"),
    ("replicas", "replicas"),
)
"""``(field, name)`` of every field :func:`changes` compares, dotted into the fingerprint."""

_VLLM = ("block_size", "num_gpu_blocks", "enable_prefix_caching", "cache_dtype", "gpu_memory_utilization")
_TGI = ("model_id", "version", "max_concurrent_requests", "max_batch_total_tokens")
_SGLANG = ("version", "model_path", "max_total_num_tokens", "tp_size", "dp_size")


def _pick(source: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(source, Mapping):
        return {}
    return {k: _scalar(source[k]) for k in keys if k in source and source[k] is not None}


def _scalar(value: Any) -> Any:
    """A number stays one; anything else is its text, at most 200 characters."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)[:200]
    return value


def _number(text: Any) -> Any:
    """A label's text as the number it spells, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            continue
    return _scalar(text)


def fingerprint(answers: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The fingerprint from what the endpoints answered: ``server`` (the header), ``models`` (``/v1/models``'s
    JSON), ``props`` (llama.cpp), ``info`` (TGI), ``server_info`` (SGLang), ``cache_config`` (vLLM's
    ``cache_config_info`` labels) and ``replicas`` (how many answered ``/metrics``); each may be missing."""
    out: dict[str, Any] = {}
    if answers.get("server"):
        out["server"] = _scalar(answers["server"])
    listed = answers.get("models")
    entries = listed.get("data") if isinstance(listed, Mapping) else None
    if isinstance(entries, list):
        mine = [e for e in entries if isinstance(e, Mapping) and e.get("id") == model]
        if mine:
            out["model"] = _pick(mine[0], ("id", "owned_by", "max_model_len"))
    props = answers.get("props")
    if isinstance(props, Mapping) and ("total_slots" in props or "build_info" in props):
        llama = _pick(props, ("total_slots", "model_path", "build_info"))
        settings = props.get("default_generation_settings")
        if isinstance(settings, Mapping) and settings.get("n_ctx") is not None:
            llama["n_ctx"] = _scalar(settings["n_ctx"])
        out["llama_cpp"] = llama
    info = answers.get("info")
    if isinstance(info, Mapping) and "model_id" in info:
        out["tgi"] = _pick(info, _TGI)
    server_info = answers.get("server_info")
    if isinstance(server_info, Mapping) and ("max_total_num_tokens" in server_info or "version" in server_info):
        out["sglang"] = _pick(server_info, _SGLANG)
    cache = answers.get("cache_config")
    if isinstance(cache, Mapping) and cache:
        out["vllm"] = {k: _number(cache[k]) for k in _VLLM if k in cache}
    if answers.get("replicas"):
        out["replicas"] = int(answers["replicas"])
    return out


def _field(target: Mapping[str, Any], dotted: str) -> Any:
    value: Any = target
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """``"name: before -> after"`` for each :data:`WATCHED` field both fingerprints hold and that differs."""
    if not before or not after:
        return []
    out = []
    for dotted, name in WATCHED:
        old, new = _field(before, dotted), _field(after, dotted)
        if old is not None and new is not None and old != new:
            out.append(f"{name}: {old} -> {new}")
    return out
