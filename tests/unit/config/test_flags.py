import re
from types import SimpleNamespace

import pytest

from locust_llm.config.flags import FLAGS
from locust_llm.config.parsers import ConfigError, parse_duration_s, parse_steps
from locust_llm.config.run_config import RunConfig


def options(**overrides):
    values = {flag.dest: flag.default for flag in FLAGS}
    values.update(overrides)
    return SimpleNamespace(**values)


def test_defaults():
    config = RunConfig.from_options(options())
    assert config.steps == (8, 16, 32, 64, 128)
    assert (config.max_tokens.mean, config.step_duration_s, config.request_timeout_s) == (128, 30.0, 120.0)
    assert config.model is None and config.api_key is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("30s", 30.0), ("2m", 120.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0)],
)
def test_durations(text, seconds):
    assert parse_duration_s(text, "--x") == seconds


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"steps": "8,16,16"}, "--steps must be strictly increasing, got 8,16,16"),
        ({"steps": "8,x"}, "--steps must be comma-separated positive integers like 8,16,32, got '8,x'"),
        ({"steps": "0,8"}, "--steps user counts must be >= 1, got 0,8"),
        (
            {"step_duration": "soon"},
            "--step-duration must be a positive duration like 30s, 2m or 1m30s, got 'soon'",
        ),
        ({"step_duration": "0s"}, "--step-duration must be a positive duration"),
        ({"max_tokens": "0"}, "--max-tokens must be MEAN or MEAN:STDDEV with an integer mean >= 1, got '0'"),
        ({"retry_policy": "polite"}, "--retry-policy must be one of honor, none, naive, got 'polite'"),
        ({"max_retries": "-1"}, "--max-retries must be an integer >= 0, got '-1'"),
        ({"fallback_on": "429,teapot"}, "--fallback-on must be comma-separated HTTP statuses like 429,503"),
        ({"hedge_ttft_ms": "soon"}, "--hedge-ttft-ms must be a number >= 0, got 'soon'"),
        ({"extra_body": "[1]"}, "--extra-body must be a JSON object, got list"),
        ({"extra_body": "{oops"}, "--extra-body must be a JSON object, got invalid JSON"),
        ({"header": ["no colon"]}, "--header must be 'Name: value', got header #1 without a ':' (value not shown)"),
        ({"header": ["X Y: v"]}, "--header must be 'Name: value' with a valid header name, got header #1"),
        ({"header": ["X@: v"]}, "--header must be 'Name: value' with a valid header name, got header 'X@'"),
        ({"input_tokens": "lots"}, "--input-tokens must be MEAN or MEAN:STDDEV"),
        ({"prompts": "/nonexistent/p.txt"}, "--prompts /nonexistent/p.txt: no such file"),
        ({"salt": "maybe"}, "--salt must be one of on, off, auto, got 'maybe'"),
        ({"seed": "x"}, "--seed must be an integer, got 'x'"),
        ({"request_timeout": "-3"}, "--request-timeout must be a positive duration"),
        ({"warmup": "150%"}, "--warmup share must be a percentage in [0, 100), got '150%'"),
        ({"warmup": "later"}, "--warmup must be auto, a duration like 5s or a share like 10%, got 'later'"),
        ({"sim_args": "--capacity 'x"}, "--sim-args cannot be split"),
        (
            {"server_metrics": "vllm:8000/metrics"},
            "--server-metrics must be auto, off or http(s):// or dns+http(s)://NAME:PORT/metrics URLs separated by "
            "commas, got 'vllm:8000/metrics'",
        ),
        ({"locust_stats": "loud"}, "--locust-stats must be one of auto, on, off, got 'loud'"),
    ],
)
def test_bad_values_give_one_line_errors_naming_flag_value_and_allowed(overrides, message):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_options(options(**overrides))
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "urls"),
    [
        ("auto", ("auto",)),
        ("OFF", ()),
        ("http://a:8000/metrics, https://b/metrics", ("http://a:8000/metrics", "https://b/metrics")),
        ("dns+http://vllm.ns.svc:8000/metrics", ("dns+http://vllm.ns.svc:8000/metrics",)),
    ],
)
def test_server_metrics_take_auto_off_or_urls(text, urls):
    config = RunConfig.from_options(options(server_metrics=text, server_metrics_interval="500ms"))
    assert config.server_metrics == urls and config.server_metrics_interval_s == 0.5


def test_steps_parse():
    assert parse_steps(" 1, 2 ,4") == (1, 2, 4)


@pytest.mark.parametrize(
    ("warmup", "step_s", "expected"),
    [
        ("auto", 30, 5.0),
        ("auto", 120, 12.0),
        ("auto", 6, 3.0),
        ("10%", 30, 3.0),
        ("2s", 30, 2.0),
        ("0", 30, 0.0),
    ],
)
def test_warmup(warmup, step_s, expected):
    config = RunConfig.from_options(options(warmup=warmup, step_duration=str(step_s)))
    assert config.warmup_s() == pytest.approx(expected)


def test_api_key_is_kept_out_of_repr_and_settings(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = RunConfig.from_options(options(api_key="sk-secret-123"))
    assert config.api_key == "sk-secret-123"
    assert "sk-secret" not in repr(config) and "sk-secret" not in str(config.settings())
    assert config.settings()["api_key_set"] is True
    assert config.secrets == ("sk-secret-123",)


def test_api_key_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert RunConfig.from_options(options()).api_key == "sk-from-env"


def test_sim_args_are_split_like_a_shell():
    assert RunConfig.from_options(options(sim_args="--capacity 4 --model 'a b'")).sim_args == (
        "--capacity",
        "4",
        "--model",
        "a b",
    )


def test_itl_events_flag():
    assert RunConfig.from_options(options()).itl_events is True
    assert RunConfig.from_options(options(locust_itl_events="off")).itl_events is False
    with pytest.raises(ConfigError, match="--locust-itl-events must be one of each, off, got 'some'"):
        RunConfig.from_options(options(locust_itl_events="some"))


def test_generator_health_thresholds():
    config = RunConfig.from_options(options(max_generator_cpu="90%", max_sched_lag="25ms"))
    assert (config.max_generator_cpu_pct, config.max_sched_lag_ms) == (90.0, 25.0)
    with pytest.raises(ConfigError, match="--max-generator-cpu must be a percentage"):
        RunConfig.from_options(options(max_generator_cpu="lots"))


def test_client_flags(tmp_path):
    system = tmp_path / "system.txt"
    system.write_text("You are terse.\n")
    config = RunConfig.from_options(
        options(
            retry_policy="naive",
            max_retries="5",
            fallback_models="a, b",
            fallback_on="429",
            hedge_ttft_ms="250",
            extra_body='{"route": {"fallback": ["b"]}}',
            header=["X-Team: llm", "X-Api-Key: k-123"],
            system_prompt=str(system),
            cache_control="on",
            input_tokens="512:128",
            max_tokens="64:16",
            seed="7",
        )
    )
    assert (config.flow.policy.name, config.flow.policy.max_retries) == ("naive", 5)
    assert config.flow.fallbacks == ("a", "b") and config.flow.fallback_on == frozenset({429})
    assert config.flow.hedge_after_s == 0.25
    assert config.workload.extra_body == {"route": {"fallback": ["b"]}}
    assert config.headers == (("X-Team", "llm"), ("X-Api-Key", "k-123"))
    assert "k-123" in config.secrets and "llm" not in config.secrets  # key-like header values are secret
    assert config.workload.system_prompt == "You are terse." and config.workload.cache_control
    assert config.workload.input_tokens.mean == 512 and config.workload.salted
    assert (config.max_tokens.mean, config.max_tokens.stddev, config.seed) == (64, 16.0, 7)
    assert "k-123" not in str(config.settings())


def test_prompts_and_input_tokens_exclude_each_other(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    with pytest.raises(ConfigError, match="exclude each other"):
        RunConfig.from_options(options(prompts=str(prompts), input_tokens="100"))


def test_headers_come_from_the_environment_too_and_stay_out_of_repr(monkeypatch):
    monkeypatch.setenv("LOCUST_LLM_HEADERS", "X-Api-Key: k-ENV-123\n\nX-Route: b")
    config = RunConfig.from_options(options(header=["X-Team: llm"]))
    assert config.headers == (("X-Team", "llm"), ("X-Api-Key", "k-ENV-123"), ("X-Route", "b"))
    assert "k-ENV-123" in config.secrets and "k-ENV-123" not in repr(config)
    assert "X-Team" not in repr(config)  # no header at all in repr


def test_a_header_without_a_colon_never_echoes_its_value():
    with pytest.raises(ConfigError) as info:
        RunConfig.from_options(options(header=["Authorization Bearer sk-live-SECRET"]))
    assert "SECRET" not in str(info.value) and "header #1 without a ':'" in str(info.value)


def test_conversation_flags_build_the_workload():
    config = RunConfig.from_options(
        options(turns="2:5", think_time="1.5:0.5", max_context_tokens="4096", price_cached_input_usd_per_mtok="0.75")
    )
    workload = config.workload
    assert (workload.turns.low, workload.turns.high, workload.think_time.seconds, workload.think_time.jitter) == (
        2,
        5,
        1.5,
        0.5,
    )
    assert workload.max_context_tokens == 4096 and workload.conversations
    assert config.prices.cached_input_usd_per_mtok == 0.75
    assert not RunConfig.from_options(options()).workload.conversations  # auto, no prompt file: single requests


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"turns": "4", "rates": "2,4"}, "--turns applies to closed-loop users (--steps or --search): with --rates"),
        ({"turns": "0"}, "--turns must be auto, N or MIN:MAX with integers 1 <= MIN <= MAX, got '0'"),
        ({"think_time": "-1"}, "--think-time must be SECONDS or SECONDS:JITTER"),
        ({"max_context_tokens": "0"}, "--max-context-tokens"),
    ],
)
def test_bad_conversation_flags_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunConfig.from_options(options(**overrides))


def test_every_help_page_formats():
    """A flag whose help says '1%' must not break argparse's %-formatting of --help (it once did)."""
    import argparse

    from locust_llm.cli import build_parser
    from locust_llm.sim.command import add_arguments as add_sim_arguments

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    pages = [parser.format_help(), *(sub.format_help() for sub in subparsers.choices.values())]
    sim = argparse.ArgumentParser()
    add_sim_arguments(sim)
    pages.append(sim.format_help())
    assert all(pages) and any("1%)" in page for page in pages)


def test_a_plan_larger_than_the_fleet_is_refused_naming_both_numbers():
    config = RunConfig.from_options(options(steps="256,512,1024", max_users_per_worker="256"))
    assert config.fleet_error(4) is None  # 4 x 256 = 1024 users: it fits exactly
    assert config.fleet_error(3) == (
        "--steps reaches 1024 users, more than 3 worker(s) x 256 users each (--max-users-per-worker) = 768: start "
        "more workers (--expect-workers, and the worker Job's parallelism) or lower --steps"
    )
    assert RunConfig.from_options(options(steps="1024")).fleet_error(1) is None  # 0: no check
    searching = RunConfig.from_options(
        options(steps="8", search="knee", search_max_users="4096", max_users_per_worker="256")
    )
    assert "--search-max-users reaches 4096 users" in searching.fleet_error(8)
    open_loop = RunConfig.from_options(options(rates="100", max_users_per_worker="1"))
    assert open_loop.fleet_error(1) is None  # generator processes are not users


def trace_file(tmp_path, n=10, gap_ms=250):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(f'{{"timestamp": {i * gap_ms}, "input_length": 64}}\n' for i in range(n)))
    return str(path)


def test_a_trace_is_replayed_at_its_speeds_as_open_loop_rates(tmp_path):
    config = RunConfig.from_options(options(trace=trace_file(tmp_path), trace_speeds="0.5,1,2"))
    assert config.open_loop and config.rates == pytest.approx((2.0, 4.0, 8.0))  # 10 requests each 250 ms: 4 req/s
    assert config.settings()["trace"]["rate_req_s"] == pytest.approx(4.0)
    assert config.settings()["trace"]["speeds"] == [0.5, 1.0, 2.0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rates": "2,4"}, "--trace replays at --trace-speeds, which excludes --rates"),
        ({"steps": "8,16"}, "--trace replays at --trace-speeds, which excludes --steps"),
        ({"trace_offset": "10s"}, "--trace-offset must lie inside the trace (2.5 s long), got 10 s"),
        ({"trace_offset": "-1s"}, "--trace-offset must be a duration >= 0"),
        ({"trace_speeds": "2,1"}, "--trace-speeds must be strictly increasing"),
        ({"search": "knee", "trace_speeds": "1,2"}, "--search starts from one load: give --trace-speeds a single"),
    ],
)
def test_a_trace_with_conflicting_flags_is_one_line_naming_both(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunConfig.from_options(options(trace=trace_file(tmp_path), **overrides))


def test_a_bad_trace_line_stops_the_configuration(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5}\n{"timestamp": 1}\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2: needs input_length, text_input or messages")):
        RunConfig.from_options(options(trace=str(path)))


@pytest.mark.parametrize(("dest", "flag"), [("prompts", "--prompts"), ("input_tokens", "--input-tokens")])
def test_a_trace_brings_its_own_prompts(tmp_path, dest, flag):
    (tmp_path / "prompts.txt").write_text("a prompt\n")
    value = str(tmp_path / "prompts.txt") if dest == "prompts" else "512"
    with pytest.raises(ConfigError, match=f"--trace supplies the prompts, which excludes {flag}"):
        RunConfig.from_options(options(trace=trace_file(tmp_path), **{dest: value}))


def test_a_search_over_a_trace_starts_from_its_one_speed_as_a_rate(tmp_path):
    config = RunConfig.from_options(options(trace=trace_file(tmp_path), trace_speeds="2", search="knee"))
    assert config.search is not None and config.rates == pytest.approx((8.0,))  # the search's start: 2 x 4 req/s
