"""Each default is defined once: in the flag table."""

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from locust_llm.config.flags import FLAGS
from locust_llm.config.run_config import RunConfig
from locust_llm.measure.sla import Prices, Sla
from locust_llm.protocol.retry import FlowConfig, RetryPolicy
from locust_llm.reports.compare import Thresholds
from locust_llm.sim.command import SIM_FLAGS
from locust_llm.workload.prompts import Workload

PACKAGE = Path(__file__).resolve().parents[3] / "locust_llm"
TABLES = {PACKAGE / "config" / "flags.py", PACKAGE / "sim" / "command.py"}


def test_run_config_has_no_default_of_its_own():
    assert all(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in dataclasses.fields(RunConfig)
    )


def test_the_typed_pieces_default_to_what_the_table_says():
    defaults = RunConfig.defaults()
    assert defaults.flow == FlowConfig() and defaults.flow.policy == RetryPolicy()
    assert defaults.gate == Thresholds()
    assert defaults.sla == Sla() and defaults.prices == Prices()
    assert defaults.workload == Workload() and defaults.max_tokens == Workload().max_tokens


def test_no_value_default_of_the_table_is_written_again_elsewhere():
    # defaults that are values (durations, counts, lists), not choice names like "auto" or "off" that are also
    # used as names in the code; one-character ones are too common to search for
    values = {f.default for f in FLAGS + SIM_FLAGS if f.default and len(f.default) > 1 and re.search(r"\d", f.default)}
    values.discard("127.0.0.1")  # the embedded simulator binds loopback on purpose, whatever --host says
    offenders = [
        f"{path.relative_to(PACKAGE)}: {value!r}"
        for path in PACKAGE.rglob("*.py")
        if path not in TABLES
        for value in values
        if f'"{value}"' in path.read_text()
    ]
    assert not offenders, offenders


def test_every_flag_has_help_and_a_unique_env_var():
    env_vars = [f.env_var for f in FLAGS + SIM_FLAGS if f.env_var]
    assert len(env_vars) == len(set(env_vars))
    assert all(f.help.strip().endswith((".", ")")) for f in FLAGS + SIM_FLAGS), [f.name for f in FLAGS + SIM_FLAGS]
    assert all(f.env_var for f in FLAGS if not f.multiple)


def test_the_gate_confidence_must_be_a_probability_a_test_can_use():
    from locust_llm.config.flags import GATE_FLAGS, parse_flags
    from locust_llm.config.parsers import ConfigError
    from locust_llm.config.run_config import thresholds_from

    values = parse_flags(SimpleNamespace(gate_confidence="0.95"), GATE_FLAGS)
    assert thresholds_from(values).share_confidence == 0.95
    values["gate_confidence"] = 1.0
    with pytest.raises(ConfigError, match=r"--gate-confidence must be between 0.5 and 0.9999, got 1"):
        thresholds_from(values)


def test_each_api_gets_its_own_path_headers_and_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-SECRET")
    chat = RunConfig.from_options(SimpleNamespace(api="chat"))
    assert chat.api_key is None and "Authorization" not in chat.request_headers("ua")
    messages = RunConfig.from_options(SimpleNamespace(api="messages"))
    headers = messages.request_headers("ua")
    assert (headers["x-api-key"], headers["anthropic-version"]) == ("ant-SECRET", "2023-06-01")
    assert "Authorization" not in headers and "ant-SECRET" in messages.secrets
    assert messages.api_of().path == "/messages" and messages.settings()["api"] == "messages"
    given = RunConfig.from_options(SimpleNamespace(api="messages", api_key="sk-given"))
    assert given.request_headers("ua")["x-api-key"] == "sk-given"
    responses = RunConfig.from_options(SimpleNamespace(api="responses", api_key="sk-1"))
    assert responses.request_headers("ua")["Authorization"] == "Bearer sk-1" and responses.api_of().path == "/responses"


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"conversation_state": "server"}, "only the Responses API has: give --api responses"),
        ({"conversation_state": "server", "api": "messages"}, "got --api messages"),
        ({"conversation_state": "server", "api": "responses", "rates": "1,2"}, "got it with --rates"),
    ],
)
def test_server_side_conversation_state_is_refused_where_it_cannot_work(options, needle):
    from locust_llm.config.parsers import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle)):
        RunConfig.from_options(SimpleNamespace(**options))
    assert RunConfig.from_options(SimpleNamespace(conversation_state="server", api="responses")).conversation_state
