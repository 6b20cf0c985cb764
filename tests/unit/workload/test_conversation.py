import random

import pytest

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.workload.conversation import Conversation
from locust_llm.workload.draws import PromptError, ThinkTime, Turns, parse_think_time, parse_turns
from locust_llm.workload.prompt_files import Prompt
from locust_llm.workload.prompts import Length, Workload


def play(workload, replies, seed=1):
    """Run one conversation to its end, answering turn k with replies[k]; the messages of every turn."""
    rng = random.Random(seed)
    conversation = Conversation(workload, rng)
    sent = []
    while not conversation.finished:
        turn = conversation.next_turn(rng)
        if turn is None:
            break
        sent.append(turn[0])
        conversation.answered(replies[len(sent) - 1])
    return conversation, sent


def test_each_turn_resends_the_history_in_order_with_the_system_prompt_once():
    workload = Workload(system_prompt="You are terse.", cache_control=True, turns=Turns(3, 3), salt=False)
    replies = ["first answer", 'second "quoted" answer\n', "третий ✓"]
    conversation, sent = play(workload, replies)
    assert len(sent) == 3 and conversation.finished
    roles = [[m["role"] for m in messages] for messages in sent]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user", "assistant", "user"],
    ]
    assert sent[0][0] == {"role": "system", "content": "You are terse.", "cache_control": {"type": "ephemeral"}}
    assert [m["content"] for m in sent[2] if m["role"] == "assistant"] == replies[:2]  # exactly as streamed
    assert sent[2][:4] == sent[1]  # the earlier turn is the prefix of the next: a prefix cache can serve it
    assert [m["content"] for m in sent[1] if m["role"] == "user"] == [sent[0][1]["content"], sent[1][3]["content"]]


def test_only_the_first_user_message_is_salted():
    workload = Workload(input_tokens=Length(20), turns=Turns(3, 3))  # synthetic prompts are salted by default
    _, sent = play(workload, ["a", "b", "c"])
    users = [m["content"] for m in sent[2] if m["role"] == "user"]
    assert users[0].startswith("[") and not users[1].startswith("[") and not users[2].startswith("[")


def test_file_conversations_replay_their_turns_and_auto_follows_the_file():
    script = Prompt(({"role": "user", "content": "q3"},), 7, ("q1", "q2", "q3"), ())
    workload = Workload(prompts=(script,))  # --turns auto
    assert workload.conversations
    conversation, sent = play(workload, ["a1", "a2", "a3"])
    assert [messages[-1]["content"] for messages in sent] == ["q1", "q2", "q3"] and conversation.planned == 3
    _, capped = play(Workload(prompts=(script,), turns=Turns(2, 2)), ["a1", "a2"])
    assert [messages[-1]["content"] for messages in capped] == ["q1", "q2"]
    _, longer = play(Workload(prompts=(script,), turns=Turns(5, 5)), ["a"] * 5)
    assert len(longer) == 3  # a file conversation ends with its own turns
    assert not Workload(prompts=(script,), turns=Turns(1, 1)).conversations  # --turns 1: sent whole, as before


def test_turn_counts_are_drawn_within_the_range():
    workload = Workload(turns=Turns(2, 4))
    counts = {Conversation(workload, random.Random(i)).planned for i in range(200)}
    assert counts == {2, 3, 4}


def test_max_context_tokens_ends_the_conversation_before_it_overflows():
    workload = Workload(turns=Turns(50, 50), max_tokens=Length(16), max_context_tokens=300, salt=False)
    conversation, sent = play(workload, ["x" * 200] * 50)  # ~50 tokens per reply
    assert 1 < len(sent) < 50 and conversation.finished
    assert all(estimate_prompt_tokens(messages) + 16 <= 300 for messages in sent)
    grown = sent[-1] + [{"role": "assistant", "content": "x" * 200}, {"role": "user", "content": "next?" * 4}]
    assert estimate_prompt_tokens(grown) + 16 > 300


def test_a_failed_turn_ends_the_conversation():
    rng = random.Random(3)
    conversation = Conversation(Workload(turns=Turns(4, 4)), rng)
    conversation.next_turn(rng)
    conversation.end()
    assert conversation.finished and conversation.turn == 1


@pytest.mark.parametrize(("text", "expected"), [("auto", None), ("4", Turns(4, 4)), ("2:6", Turns(2, 6))])
def test_parse_turns(text, expected):
    assert parse_turns(text) == expected


@pytest.mark.parametrize("text", ["0", "3:2", "x", "1:", "-1"])
def test_bad_turns_are_one_line_errors(text):
    with pytest.raises(PromptError, match=r"--turns must be auto, N or MIN:MAX .* got"):
        parse_turns(text)


def test_think_time_draws_within_its_jitter():
    think = parse_think_time("2:0.5")
    draws = [think.draw(random.Random(i)) for i in range(500)]
    assert 1.5 <= min(draws) < 1.6 and 2.4 < max(draws) <= 2.5
    assert ThinkTime().draw(random.Random()) == 0.0
    with pytest.raises(PromptError, match="--think-time must be SECONDS or SECONDS:JITTER"):
        parse_think_time("1:2")


def test_an_answer_that_called_a_tool_is_followed_by_a_turn_that_sends_its_result_back():
    import random

    from locust_llm.protocol.tokens import count_text_tokens
    from locust_llm.workload.conversation import Conversation
    from locust_llm.workload.draws import Turns
    from locust_llm.workload.prompts import Workload

    conversation = Conversation(Workload(turns=Turns(3, 3), tool_result_tokens=40, salt=False), random.Random(1))
    rng = random.Random(2)
    first, _ = conversation.next_turn(rng)
    call = {"id": "call_7", "name": "search_docs", "arguments": '{"q": "x"}'}
    conversation.answered("", tools=[call], rng=rng)
    second, _ = conversation.next_turn(rng)
    assert second[:-1] == [*first, second[-2]] and second[-2]["tool_calls"][0]["id"] == "call_7"
    result = second[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_7")
    assert count_text_tokens(result["content"]) == 40 and conversation.new_messages == 1
    conversation.answered("done")
    third, _ = conversation.next_turn(rng)
    assert third[-1]["role"] == "user" and third[-2] == {"role": "assistant", "content": "done"}
