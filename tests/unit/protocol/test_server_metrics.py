"""Each serving engine's /metrics, read into the four gauges. The fixtures are written by hand from each project's
documented metric names (vLLM, SGLang, TGI, llama.cpp), in the Prometheus text format they serve."""

import pytest

from locust_llm.protocol.server_metrics import MAX_SAMPLES, ScrapeError, gauges, parse

VLLM = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.97
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 31.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:e2e_request_latency_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:e2e_request_latency_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2e+09
"""
VLLM_OLD = """# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4
"""
SGLANG = """# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="qwen"} 0.28
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="qwen"} 9.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="qwen"} 0.0
"""
TGI = """# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 16
# TYPE tgi_queue_size gauge
tgi_queue_size 3
"""
LLAMACPP = """# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 5
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.61
"""


@pytest.mark.parametrize(
    ("text", "model", "expected"),
    [
        (VLLM, "meta-llama/Llama-3.1-8B-Instruct", {"kv_usage": 0.97, "running": 31, "waiting": 12, "preemptions": 7}),
        (VLLM_OLD, "m", {"kv_usage": 0.5, "running": 4}),
        (SGLANG, "qwen", {"kv_usage": 0.28, "running": 9, "waiting": 0}),
        (TGI, "any", {"running": 16, "waiting": 3}),
        (LLAMACPP, "any", {"kv_usage": 0.61, "running": 4, "waiting": 5}),
    ],
    ids=["vllm", "vllm-older", "sglang", "tgi", "llama.cpp"],
)
def test_each_servers_families_map_to_the_four_gauges(text, model, expected):
    assert gauges(parse(text), model) == pytest.approx(expected)


def test_unknown_families_are_kept_raw_and_histograms_left_out():
    samples = parse(VLLM)
    raw = [s for s in samples if not s.gauge]
    assert [s.name for s in raw] == ["process_resident_memory_bytes"]
    assert not any("bucket" in s.name or s.name.endswith("_sum") for s in samples)
    assert samples[0].gauge  # known families first
    assert samples[0].labels == "engine=0;model_name=meta-llama/Llama-3.1-8B-Instruct"


def test_another_models_samples_stay_out_of_the_gauges_and_kv_is_the_fullest_engine():
    text = """# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.4
vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.9
vllm:kv_cache_usage_perc{engine="0",model_name="b"} 1.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3
vllm:num_requests_running{engine="1",model_name="a"} 5
vllm:num_requests_running{engine="0",model_name="b"} 100
"""
    assert gauges(parse(text), "a") == {"kv_usage": 0.9, "running": 8}
    assert gauges(parse(text), "unknown-name") == {"kv_usage": 1.0, "running": 108}  # no sample names it: all


@pytest.mark.parametrize("text", ["<html><body>Not Found</body></html>", "garbage here\n", '{"kv": 1}'])
def test_what_is_not_prometheus_text_is_refused(text):
    with pytest.raises(ScrapeError):
        parse(text)


def test_a_huge_scrape_is_capped():
    text = "\n".join(f"# TYPE g{i} gauge\ng{i} {i}" for i in range(MAX_SAMPLES + 50)) + "\n"
    assert len(parse(text)) == MAX_SAMPLES


def test_known_families_after_thousands_of_others_are_kept_and_the_others_cut_before_parsing():
    """A server with many families (44,000 filler gauges, then vLLM's): its known gauges and its info samples are all
    read, whatever comes before them; of the others the first MAX_SAMPLES are considered, so the parse stays small."""
    filler = "# TYPE filler gauge\n" + "".join(f'filler{{i="{i}"}} 1\n' for i in range(44_000))
    info = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="2000"} 1\n'
    samples = parse(filler + VLLM + info)
    alone = gauges(parse(VLLM), "meta-llama/Llama-3.1-8B-Instruct")
    assert gauges(samples, "meta-llama/Llama-3.1-8B-Instruct") == alone and len(alone) == 4
    assert "vllm:cache_config_info" in {s.name for s in samples} and len(samples) == MAX_SAMPLES


def test_the_providers_caps_are_read_from_the_answers_head():
    from locust_llm.protocol.metrics import ratelimit_headers

    head = {
        "x-ratelimit-limit-requests": "48",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-limit-tokens": "2e6",
    }
    assert ratelimit_headers(lambda name: head.get(name, "")) == (48, 0, 2_000_000, None)
    assert ratelimit_headers(lambda name: "") is None  # a server that states none
    assert ratelimit_headers(lambda name: "soon" if "remaining" in name else None) is None  # unreadable: none
