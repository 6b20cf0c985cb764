import statistics

import pytest

from locust_llm.sim.batching import BatchParams
from locust_llm.sim.truth import replay_closed_loop, saturation_users, sla_capacity, steady_state

TABLE = ((8, 12.0), (16, 14.0), (32, 17.0), (64, 20.0), (128, 26.0))
P = BatchParams(kv_blocks=160, decode_table=TABLE, prefill_ms_per_1k=25.0)
PROMPT, OUTPUT = 30, 64


def test_saturation_users_follow_the_average_blocks_per_sequence():
    # 31..94 tokens in 16-token blocks: 2 x 2 + 16 x 3 + 16 x 4 + 16 x 5 + 14 x 6 = 280 blocks over 64 tokens
    assert saturation_users(P, PROMPT, OUTPUT) == int(P.usable_blocks / (280 / 64))


def test_max_batch_caps_saturation():
    assert saturation_users(BatchParams(kv_blocks=10_000, max_batch=7), PROMPT, OUTPUT) == 7


@pytest.mark.parametrize("users", [4, 16, 24])
def test_below_the_knee_the_analytic_itl_and_throughput_match_the_replay(users):
    replay = replay_closed_loop(P, users, PROMPT, OUTPUT, requests_per_user=12)
    steady = steady_state(P, users, PROMPT, OUTPUT)
    tail = replay.itl_s[len(replay.itl_s) // 2 :]
    assert statistics.median(tail) == pytest.approx(steady.itl_s, rel=0.25)
    assert replay.output_tokens / replay.duration_s == pytest.approx(steady.output_tok_s, rel=0.25)
    assert not steady.queueing


@pytest.mark.parametrize("users", [80, 120])
def test_above_the_knee_ttft_is_dominated_by_the_queue(users):
    replay = replay_closed_loop(P, users, PROMPT, OUTPUT, requests_per_user=10)
    steady = steady_state(P, users, PROMPT, OUTPUT)
    tail = sorted(replay.ttft_s[len(replay.ttft_s) // 2 :])
    assert steady.queueing
    # preemptions near a full cache move some of the wait from TTFT to the ITL, hence the wide band
    assert statistics.median(tail) == pytest.approx(steady.ttft_s, rel=0.6)
    assert statistics.median(tail) > 10 * steady_state(P, 8, PROMPT, OUTPUT).ttft_s


def test_throughput_plateaus_past_the_knee():
    s = saturation_users(P, PROMPT, OUTPUT)
    at_knee = steady_state(P, s, PROMPT, OUTPUT).output_tok_s
    assert steady_state(P, 4 * s, PROMPT, OUTPUT).output_tok_s == pytest.approx(at_knee, rel=0.1)


def test_drawn_output_lengths_average_between_the_fraction_and_the_maximum():
    replay = replay_closed_loop(P, 8, PROMPT, OUTPUT, requests_per_user=25, output_fraction=0.5)
    mean = replay.output_tokens / 200
    assert 0.75 * OUTPUT * 0.9 <= mean <= 0.75 * OUTPUT * 1.1  # uniform in [32, 64]: mean 48


def test_sla_capacity_lies_past_the_knee_and_below_where_the_mean_ttft_breaks_the_limit():
    s = saturation_users(P, PROMPT, OUTPUT)
    limit_ms = 1000 * steady_state(P, 2 * s, PROMPT, OUTPUT).ttft_s  # the analytic mean TTFT at twice the knee
    answer, p99s = sla_capacity(P, PROMPT, OUTPUT, 1.0, limit_ms, 4 * s)
    assert s <= answer <= 2 * s  # a p99 is at least the mean: the limit is crossed no later than 2 s
    assert p99s[answer] <= limit_ms and all(v > limit_ms for u, v in p99s.items() if u > answer)
    assert sla_capacity(P, PROMPT, OUTPUT, 1.0, 0.001, 4 * s)[0] == 0  # nothing meets an impossible limit


@pytest.mark.parametrize(("prompt", "prefix"), [(1030, 1000), (530, 512), (300, 100)])
def test_a_shared_prefix_raises_the_knee_as_the_engine_shows(prompt, prefix):
    """The analytic steady state with a shared prefix agrees with the engine's own replay on both sides of its
    knee (outputs drawn in [32, 64], mean 48, so that users do not move in lock-step)."""
    p = BatchParams(kv_blocks=400, decode_table=TABLE, prefill_ms_per_1k=25.0)
    s_shared, s_alone = saturation_users(p, prompt, 48, prefix), saturation_users(p, prompt, 48)
    assert s_shared > s_alone
    for users in (s_shared - 2, 3 * s_shared):
        replay = replay_closed_loop(p, users, prompt, 64, 8, output_fraction=0.5, prefix_tokens=prefix)
        steady = steady_state(p, users, prompt, 48, prefix)
        tail = statistics.median(replay.ttft_s[len(replay.ttft_s) // 2 :])
        assert tail == pytest.approx(steady.ttft_s, rel=0.3), users
        assert steady.queueing is (users > s_shared)


def test_without_sharing_the_same_prompts_queue_at_the_lower_knee():
    p = BatchParams(kv_blocks=400, decode_table=TABLE, prefill_ms_per_1k=25.0)
    s_alone, s_shared = saturation_users(p, 1030, 48), saturation_users(p, 1030, 48, 1000)
    users = 2 * s_alone  # well past the knee alone, far below it shared
    assert users < s_shared
    alone = replay_closed_loop(p, users, 1030, 64, 8, output_fraction=0.5)
    shared = replay_closed_loop(p, users, 1030, 64, 8, output_fraction=0.5, prefix_tokens=1000)
    assert statistics.median(alone.ttft_s[users:]) > 3 * statistics.median(shared.ttft_s[users:])
    assert shared.output_tokens / shared.duration_s > 1.5 * alone.output_tokens / alone.duration_s
