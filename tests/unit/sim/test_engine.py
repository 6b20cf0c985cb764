import pytest

from locust_llm.sim.engine import Emission, PacingEngine, PacingParams, SeqRequest

MS = 1_000_000


def seq(i, n=3):
    return SeqRequest(i, prompt_tokens=10, output_tokens=n)


def drain(engine, until_ns=10**15):
    out = []
    while (t := engine.next_event_ns()) is not None and t <= until_ns:
        out += engine.advance(t)
    return out


def test_tokens_are_scheduled_from_admission_without_drift():
    engine = PacingEngine(PacingParams(ttft_ms=200, itl_ms=20, capacity=4))
    engine.submit(seq(1, n=3), now_ns=1_000)
    assert drain(engine) == [
        Emission(1, 0, 1_000 + 200 * MS, False),
        Emission(1, 1, 1_000 + 220 * MS, False),
        Emission(1, 2, 1_000 + 240 * MS, True),
    ]


def test_a_late_advance_does_not_shift_the_schedule():
    engine = PacingEngine(PacingParams(ttft_ms=10, itl_ms=5, capacity=1))
    engine.submit(seq(1, n=3), 0)
    assert [e.at_ns for e in engine.advance(10**9)] == [10 * MS, 15 * MS, 20 * MS]


def test_fifo_admission_when_full_and_ttft_includes_the_wait():
    engine = PacingEngine(PacingParams(ttft_ms=100, itl_ms=10, capacity=1))
    for i in (1, 2, 3):
        engine.submit(seq(i, n=2), 0)
    assert (engine.running, engine.waiting, engine.queued) == (1, 2, 2)
    firsts = {e.seq_id: e.at_ns for e in drain(engine) if e.token == 0}
    # each sequence holds the slot for ttft + itl = 110 ms
    assert firsts == {1: 100 * MS, 2: 210 * MS, 3: 320 * MS}
    assert (engine.admitted, engine.finished, engine.running) == (3, 3, 0)


def test_cancel_frees_the_slot_for_the_next_in_line():
    engine = PacingEngine(PacingParams(ttft_ms=100, itl_ms=10, capacity=1))
    engine.submit(seq(1), 0)
    engine.submit(seq(2), 0)
    engine.cancel(1, 50 * MS)
    assert drain(engine)[0] == Emission(2, 0, 150 * MS, False)
    assert engine.cancelled == 1


def test_cancel_of_a_waiting_sequence_removes_it():
    engine = PacingEngine(PacingParams(capacity=1))
    engine.submit(seq(1), 0)
    engine.submit(seq(2), 0)
    engine.cancel(2, 0)
    assert {e.seq_id for e in drain(engine)} == {1}


def closed_loop_ttft_s(params, users, n, requests_per_user=40):
    """Mean TTFT of `users` clients that send the next request the moment the previous one ends."""
    engine = PacingEngine(params)
    ids = iter(range(1, 10**9))
    sent = {}
    ttfts = []
    for _ in range(users):
        i = next(ids)
        sent[i] = 0
        engine.submit(seq(i, n), 0)
    done = 0
    while done < users * requests_per_user:
        t = engine.next_event_ns()
        for e in engine.advance(t):
            if e.token == 0:
                ttfts.append((e.at_ns - sent[e.seq_id]) / 1e9)
            if e.last:
                done += 1
                i = next(ids)
                sent[i] = e.at_ns
                engine.submit(seq(i, n), e.at_ns)
    tail = ttfts[len(ttfts) // 2 :]  # steady state
    return sum(tail) / len(tail)


@pytest.mark.parametrize("users", [1, 8, 16, 17, 32, 64])
def test_analytic_steady_ttft_matches_a_simulated_closed_loop(users):
    params = PacingParams(ttft_ms=200, itl_ms=20, capacity=16)
    expected = params.steady_ttft_s(users, output_tokens=10)
    assert closed_loop_ttft_s(params, users, n=10) == pytest.approx(expected, rel=0.02)


def test_ttft_grows_linearly_with_the_queue_ahead():
    params = PacingParams(ttft_ms=200, itl_ms=20, capacity=16)
    t = [params.steady_ttft_s(u, 10) for u in (32, 48, 64)]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0])
    assert params.saturation_users == 16


@pytest.mark.parametrize("kwargs", [{"capacity": 0}, {"ttft_ms": -1}])
def test_invalid_parameters(kwargs):
    with pytest.raises(ValueError):
        PacingParams(**kwargs)
