"""Routes files: what is read, and each bad file's one line naming the route and the field (exit 2 in a run)."""

import pytest

from locust_llm.config.parsers import ConfigError
from locust_llm.config.routes import load_routes

GOOD = """
[[route]]
name = "xai"
base_url = "https://api.x.ai/v1/"
model = "grok-4"
api_key_env = "XAI_API_KEY"
prices = { input = 3.0, output = 15.0, cached = 0.75 }

[[route]]
name = "vllm-local"
base_url = "http://vllm:8000/v1"
model = "llama"
max_tokens = 256
weight = 2
headers = { "X-Team" = "llm", "api-key" = "env:LOCAL_KEY", "X-Org" = "env:ORG_ID" }
extra_body = { top_k = 20 }

[policy]
primary = "xai"
fallback = ["vllm-local"]
fallback_on = [429, 503, "timeout", "connect_error"]
hedge_ttft_ms = 2000
hedge_to = "vllm-local"
retry_policy = "honor"
"""
ENV = {"XAI_API_KEY": "xai-SECRET-1", "LOCAL_KEY": "local-SECRET-2", "ORG_ID": "org-SECRET-3"}


def load(tmp_path, text, env=ENV):
    path = tmp_path / "routes.toml"
    path.write_text(text)
    return load_routes(str(path), env)


def test_a_good_file_is_read_with_its_keys_from_the_environment(tmp_path):
    routes = load(tmp_path, GOOD)
    xai, local = routes["xai"], routes["vllm-local"]
    assert (xai.base_url, xai.model, xai.api_key, xai.prices.cached_input_usd_per_mtok) == (
        "https://api.x.ai/v1",
        "grok-4",
        "xai-SECRET-1",
        0.75,
    )
    assert dict(local.headers) == {"X-Team": "llm", "api-key": "local-SECRET-2", "X-Org": "org-SECRET-3"}
    assert (local.max_tokens, local.weight, local.extra_body, local.api_key) == (256, 2.0, {"top_k": 20}, None)
    p = routes.policy
    assert (p.primary, p.fallback, p.fallback_on, p.fallback_causes) == (
        (("xai", 1.0),),
        ("vllm-local",),
        frozenset({429, 503}),
        frozenset({"timeout", "connect_error"}),
    )
    assert (p.hedge_ttft_ms, p.hedge_to, p.retry_policy) == (2000.0, "vllm-local", "honor")
    assert set(routes.credentials()) == {"xai-SECRET-1", "local-SECRET-2", "org-SECRET-3"}  # env: values are secret
    assert "SECRET" not in repr(routes) and "SECRET" not in str(routes.describe())
    assert xai.api is None  # --api's
    assert load(tmp_path, GOOD.replace("weight = 2", 'weight = 2\napi = "messages"'))["vllm-local"].api == "messages"


def test_primary_weights_come_from_a_table_or_from_the_routes_weights(tmp_path):
    table = load(tmp_path, GOOD.replace('primary = "xai"', "primary = { xai = 3, vllm-local = 1 }"))
    assert table.policy.primary == (("xai", 3.0), ("vllm-local", 1.0))
    listed = load(tmp_path, GOOD.replace('primary = "xai"', 'primary = ["xai", "vllm-local"]'))
    assert listed.policy.primary == (("xai", 1.0), ("vllm-local", 2.0))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('model = "grok-4"', 'model = "grok-4"\nmodle = "x"'), "route 'xai' field 'modle': unknown field"),
        (('api_key_env = "XAI_API_KEY"', 'api_key = "xai-abc"'), "route 'xai' field 'api_key': keys are never"),
        (('"X-Team" = "llm"', '"Authorization" = "Bearer x"'), "field 'headers.Authorization': a secret header"),
        (("https://api.x.ai/v1/", "ftp://api.x.ai"), "route 'xai' field 'base_url': must be an http:// or https://"),
        (
            ('fallback = ["vllm-local"]', 'fallback = ["openai"]'),
            "[policy] field 'fallback': names no route: got 'openai'",
        ),
        (('primary = "xai"', 'primary = "azure"'), "[policy] field 'primary': names no route"),
        (('hedge_to = "vllm-local"', 'hedge_to = "nope"'), "[policy] field 'hedge_to': names no route"),
        (('retry_policy = "honor"', 'retry_policy = "often"'), "field 'retry_policy': must be one of honor"),
        (('"timeout",', '"slow",'), "field 'fallback_on': each entry must be HTTP statuses or"),
        (("max_tokens = 256", "max_tokens = 0"), "route 'vllm-local' field 'max_tokens'"),
        (('name = "vllm-local"', 'name = "xai"'), "route #2 field 'name': 'xai' is used by another route"),
        (("[policy]", "[policy]\nretries = 3"), "[policy] field 'retries': unknown field"),
        (("output = 15.0", "output = -1"), "field 'prices.output': must be a number of at least 0"),
        (("weight = 2", 'weight = 2\napi = "grpc"'), "route 'vllm-local' field 'api': must be one of chat, responses"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_route_and_the_field(tmp_path, change, expected):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, GOOD.replace(*change))
    message = str(err.value)
    assert expected in message and "\n" not in message
    assert "xai-abc" not in message and "SECRET" not in message


def test_a_missing_key_variable_names_the_route_and_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="route 'xai' field 'api_key_env': the environment variable XAI_API_KEY"):
        load(tmp_path, GOOD, {"LOCAL_KEY": "k", "ORG_ID": "o"})


def test_an_unreadable_or_broken_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="--routes must name a readable TOML file"):
        load_routes(str(tmp_path / "none.toml"), ENV)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, "[[route]\nname=")
    with pytest.raises(ConfigError, match="no \\[\\[route\\]\\] table"):
        load(tmp_path, "[policy]\n")


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("model", "grok-4", "--model"),
        ("api_key", "sk-given-on-the-command-line", "--api-key"),
        ("fallback_models", "m2", "--fallback-models"),
        ("header", ["Authorization: Bearer x"], "a secret --header"),
        ("insecure", True, "--insecure"),
    ],
)
def test_with_routes_the_single_endpoint_flags_are_a_conflict_named_in_one_line(
    tmp_path, monkeypatch, flag, value, named
):
    from types import SimpleNamespace

    from locust_llm.config.run_config import RunConfig

    for name, key in ENV.items():
        monkeypatch.setenv(name, key)
    path = tmp_path / "routes.toml"
    path.write_text(GOOD)
    with pytest.raises(ConfigError) as err:
        RunConfig.from_options(SimpleNamespace(routes=str(path), **{flag: value}))
    assert f"excludes {named}" in str(err.value) and "sk-given" not in str(err.value)


def test_openai_api_key_in_the_environment_is_no_conflict_and_the_policy_sets_the_flow(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from locust_llm.config.run_config import RunConfig

    for name, key in {**ENV, "OPENAI_API_KEY": "sk-env"}.items():
        monkeypatch.setenv(name, key)
    path = tmp_path / "routes.toml"
    path.write_text(GOOD)
    config = RunConfig.from_options(SimpleNamespace(routes=str(path), api_key="sk-env"))
    assert config.api_key is None and config.primary_route == "xai"
    flow = config.flow
    assert (flow.primaries, flow.fallbacks, flow.hedge_after_s, flow.hedge_to) == (
        (("xai", 1.0),),
        ("vllm-local",),
        2.0,
        "vllm-local",
    )
    headers = config.request_headers("ua", config.routes["xai"])
    assert headers["Authorization"] == "Bearer xai-SECRET-1" and "api-key" not in headers  # its own key only
    assert config.request_headers("ua", config.routes["vllm-local"]).get("Authorization") is None
    assert {"xai-SECRET-1", "local-SECRET-2"} <= set(config.secrets)
    dropped = config.without_routes({"vllm-local"})
    assert dropped.routes.names == ("xai",) and dropped.flow.fallbacks == () and dropped.flow.hedge_to is None
