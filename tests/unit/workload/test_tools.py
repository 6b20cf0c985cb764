"""--tools files: checked once, one line naming the tool and the problem; each API's form of them."""

import orjson
import pytest

from locust_llm.protocol import api_chat, api_messages, api_responses
from locust_llm.workload.draws import PromptError
from locust_llm.workload.tools import load_tools, parse_tool_share
from tests.support.procs import ROOT

TOOLS = ROOT / "tests" / "support" / "tools.json"


def test_a_good_file_is_read_and_each_api_offers_it_in_its_own_form():
    tools = load_tools(str(TOOLS))
    assert [t["function"]["name"] for t in tools] == ["get_weather", "search_docs"]
    chat = api_chat.API.tools(tools, True)
    assert chat == {"tools": list(tools), "tool_choice": "required"}
    responses = api_responses.API.tools(tools, False)
    assert responses["tool_choice"] == "auto" and responses["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": tools[0]["function"]["parameters"],
    }
    messages = api_messages.API.tools(tools, True)
    assert messages["tool_choice"] == {"type": "any"}
    assert messages["tools"][1] == {"name": "search_docs", "input_schema": tools[1]["function"]["parameters"]}


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"[", "not JSON"),
        (b"{}", "must be a non-empty JSON array of tools, got dict"),
        (b'[{"type": "function"}]', 'tool #1 must be {"type": "function", "function": {...}}'),
        (b'[{"type": "function", "function": {"name": "a b"}}]', "tool #1: 'name' must be 1-64 letters"),
        (
            b'[{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]',
            "tool #1 (f): 'parameters' is not valid JSON Schema: 'objekt' is not valid",
        ),
    ],
)
def test_a_bad_file_is_one_line_naming_the_tool_and_the_problem(tmp_path, content, needle):
    path = tmp_path / "tools.json"
    path.write_bytes(content)
    with pytest.raises(PromptError) as err:
        load_tools(str(path))
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_share_of_turns_is_a_fraction_or_a_percentage_from_0_to_1():
    assert (parse_tool_share("25%"), parse_tool_share("1"), parse_tool_share("0")) == (0.25, 1.0, 0.0)
    with pytest.raises(PromptError, match="from 0 to 100%"):
        parse_tool_share("1.5")


def test_a_history_with_a_tool_call_and_its_result_is_sent_in_each_api_s_form():
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    items = orjson.loads(api_responses.API.body("m", history, 8, None, False))["input"]
    assert items[1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    turns = orjson.loads(api_messages.API.body("m", history, 8, None, False))["messages"]
    assert turns[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}],
    }
    assert turns[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}],
    }
