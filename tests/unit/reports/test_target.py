"""The target's fingerprint from what each kind of server answers, nothing guessed; and what counts as a change."""

import pytest

from locust_llm.reports.target import changes, fingerprint

VLLM_MODELS = {"object": "list", "data": [{"id": "m", "owned_by": "vllm", "max_model_len": 32768, "root": "/x"}]}
VLLM_CACHE = {
    "block_size": "16",
    "num_gpu_blocks": "27000",
    "enable_prefix_caching": "True",
    "cache_dtype": "auto",
    "gpu_memory_utilization": "0.9",
    "engine": "0",
}
LLAMA_PROPS = {
    "total_slots": 4,
    "default_generation_settings": {"n_ctx": 8192},
    "model_path": "/m.gguf",
    "build_info": "b4800-abc",
    "chat_template": "{{ long }}",
}
TGI_INFO = {
    "model_id": "meta/llama",
    "version": "3.1.0",
    "max_concurrent_requests": 128,
    "max_batch_total_tokens": 100000,
    "sha": "x",
}
SGLANG = {"version": "0.4.6", "model_path": "meta/llama", "max_total_num_tokens": 500000, "tp_size": 2, "other": 1}


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (
            {"server": "uvicorn", "models": VLLM_MODELS, "cache_config": VLLM_CACHE, "replicas": 2},
            {
                "server": "uvicorn",
                "model": {"id": "m", "owned_by": "vllm", "max_model_len": 32768},
                "vllm": {
                    "block_size": 16,
                    "num_gpu_blocks": 27000,
                    "enable_prefix_caching": "True",
                    "cache_dtype": "auto",
                    "gpu_memory_utilization": 0.9,
                },
                "replicas": 2,
            },
        ),
        (
            {"server": "llama.cpp", "props": LLAMA_PROPS},
            {
                "server": "llama.cpp",
                "llama_cpp": {"total_slots": 4, "model_path": "/m.gguf", "build_info": "b4800-abc", "n_ctx": 8192},
            },
        ),
        (
            {"info": TGI_INFO},
            {
                "tgi": {
                    k: TGI_INFO[k] for k in ("model_id", "version", "max_concurrent_requests", "max_batch_total_tokens")
                }
            },
        ),
        ({"server_info": SGLANG}, {"sglang": {k: v for k, v in SGLANG.items() if k != "other"}}),
    ],
    ids=["vllm", "llama.cpp", "tgi", "sglang"],
)
def test_each_engine_says_what_it_is(answers, expected):
    assert fingerprint(answers, "m") == expected


def test_what_a_server_does_not_say_is_absent_never_guessed():
    """A hosted API: another model listed, JSON of the wrong shape at /props and /info, no header, no metrics."""
    answers = {"models": {"data": [{"id": "other"}]}, "props": ["x"], "info": {"detail": "Not Found"}, "replicas": 0}
    assert fingerprint(answers, "m") == {}
    assert fingerprint({"models": {"data": "nope"}, "server_info": "x", "cache_config": {}}, "m") == {}


def test_a_long_or_odd_value_is_kept_as_short_text():
    got = fingerprint({"server": "x" * 500, "props": {"build_info": {"nested": True}, "total_slots": True}}, "m")
    assert got["server"] == "x" * 200 and got["llama_cpp"] == {"build_info": "{'nested': True}", "total_slots": "True"}


def test_changes_are_the_watched_fields_both_sides_know():
    before = fingerprint({"server": "vllm/0.8", "models": VLLM_MODELS, "cache_config": VLLM_CACHE, "replicas": 1}, "m")
    after = fingerprint(
        {"models": VLLM_MODELS, "cache_config": {**VLLM_CACHE, "num_gpu_blocks": "13500"}, "replicas": 3}, "m"
    )
    assert changes(before, after) == ["KV blocks: 27000 -> 13500", "replicas: 1 -> 3"]  # the header: unknown tonight
    assert changes(before, before) == [] and changes(None, after) == [] and changes(before, {}) == []
    swapped = {**before, "model": {**before["model"], "id": "m2"}}
    assert changes(before, swapped) == ["model: m -> m2"]
