"""The intended start of each request: when the user was ready, not when the (possibly busy) generator sent it."""

import time
from types import SimpleNamespace

import gevent

from locust_llm.users.base import LLMUserMixin
from locust_llm.workload.prompts import Workload

MS = 1_000_000


class FakeFlow:
    def __init__(self):
        self.intended = []

    def request(self, model, messages, max_tokens, intended_ns):
        self.intended.append(intended_ns)


def user(think_s=0.0):
    class User(LLMUserMixin):
        def think_time_s(self):
            return think_s

    u = User()
    u.llm = SimpleNamespace(model="m", fatal_message="", collector=SimpleNamespace(holds={}))
    u.workload, u.flow, u._intended_ns = Workload(), FakeFlow(), 0
    import random

    u.rng = random.Random(0)
    return u


def test_a_request_sent_late_keeps_the_moment_the_user_was_ready():
    u = user()
    u.wait_time()  # the request ends: the user is ready for the next one now
    ready = time.perf_counter_ns()
    gevent.sleep(0.05)  # ... but the generator gets to it 50 ms later
    u.chat_once()
    (intended,) = u.flow.intended
    assert intended <= ready and time.perf_counter_ns() - intended >= 50 * MS


def test_think_time_moves_the_intended_start_later():
    u = user(think_s=0.2)
    before = time.perf_counter_ns()
    assert u.wait_time() == 0.2
    u.chat_once()
    assert u.flow.intended[0] >= before + 200 * MS


def test_the_first_request_is_meant_for_the_end_of_its_random_spread():
    u = user()
    u.first_request_spread_s = 0.05
    before = time.perf_counter_ns()
    u.on_start()
    u.chat_once()
    assert before <= u.flow.intended[0] <= time.perf_counter_ns()
    assert u.flow.intended[0] <= before + 50 * MS + 5 * MS


class ReplyingFlow:
    """Answers every turn with a reply of its own, or fails the turns listed in ``fail``."""

    def __init__(self, fail=()):
        self.sent, self.fail = [], set(fail)

    def request(self, model, messages, max_tokens, intended_ns):
        from locust_llm.protocol.metrics import Outcome, RequestResult

        self.sent.append([dict(m) for m in messages])
        result = RequestResult(model, intended_ns, intended_ns, reply=f"reply {len(self.sent)}")
        if len(self.sent) in self.fail:
            result.fail(Outcome.HTTP_5XX, "HTTP 503")
        return result


def conversing_user(fail=(), think="2.0"):
    import random

    from locust_llm.workload.draws import Turns, parse_think_time

    u = LLMUserMixin()  # its own think_time_s: --think-time between turns
    u.llm = SimpleNamespace(model="m", fatal_message="", collector=SimpleNamespace(holds={}))
    u.rng, u._intended_ns = random.Random(0), 0
    u.flow = ReplyingFlow(fail)
    u.keep_reply, u.turn = True, 0
    u.workload = Workload(turns=Turns(3, 3), think_time=parse_think_time(think), salt=False)
    return u


def test_a_conversation_sends_its_turns_with_the_replies_and_thinks_only_between_turns():
    u = conversing_user()
    pauses = []
    for _ in range(4):
        u.chat_once()
        pauses.append(u.think_time_s())
    sent = u.flow.sent
    assert [len(m) for m in sent] == [1, 3, 5, 1]  # three turns, then a new conversation
    assert [m["content"] for m in sent[2] if m["role"] == "assistant"] == ["reply 1", "reply 2"]
    assert pauses == [2.0, 2.0, 0.0, 2.0]  # no think time after a conversation's last turn
    assert u.turn == 1


def test_a_failed_turn_ends_the_conversation():
    u = conversing_user(fail={2})
    for _ in range(3):
        u.chat_once()
    assert [len(m) for m in u.flow.sent] == [1, 3, 1]  # turn 2 failed: the next request starts afresh


class ChainingFlow(ReplyingFlow):
    """Each answer kept by the server as ``resp_N``; ``chained`` is what the user's client would send."""

    def __init__(self, user, fail=()):
        super().__init__(fail)
        self.user, self.chains = user, []

    def request(self, model, messages, max_tokens, intended_ns):
        sent, chain = self.user.chained(model, messages)
        self.chains.append((len(sent), chain))
        result = super().request(model, messages, max_tokens, intended_ns)
        result.response_id = f"resp_{len(self.sent)}"
        return result


def test_server_side_state_sends_each_later_turn_alone_with_the_last_answer_s_id():
    u = conversing_user(fail={5})
    u.config = SimpleNamespace(conversation_state="server")
    u.open_loop = None
    u.flow = ChainingFlow(u, fail={5})
    for _ in range(6):
        u.chat_once()
    assert u.flow.chains == [
        (1, {"store": True}),  # a first turn is kept too, so the next can name it
        (1, {"store": True, "previous_response_id": "resp_1"}),
        (1, {"store": True, "previous_response_id": "resp_2"}),
        (1, {"store": True}),  # a new conversation
        (1, {"store": True, "previous_response_id": "resp_4"}),  # ... whose second turn fails
        (1, {"store": True}),  # a failed turn ends it: nothing to chain to
    ]
    assert [len(m) for m in u.flow.sent] == [1, 3, 5, 1, 3, 1]  # the whole history stays at hand (fallbacks)
    assert u.chained("other-model", u.flow.sent[-1]) == (u.flow.sent[-1], {"store": True})
