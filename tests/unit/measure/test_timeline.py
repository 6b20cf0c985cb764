from locust_llm.measure.timeline import Timeline


def test_samples_are_located_by_local_observation_time():
    t = Timeline()
    t.begin(1, 8, now_ns=1_000, warmup_ns=100)
    t.begin(2, 16, now_ns=2_000, warmup_ns=100)
    assert t.locate(999) == (0, "warmup")
    assert t.locate(1_000) == (1, "warmup")
    assert t.locate(1_099) == (1, "warmup")
    assert t.locate(1_100) == (1, "steady")
    assert t.locate(2_000) == (2, "warmup")
    assert t.locate(10**9) == (2, "steady")
    t.end(5_000)
    assert t.locate(4_999) == (2, "steady") and t.locate(5_000) == (2, "drain")


def test_time_never_goes_backwards():
    t = Timeline()
    t.begin(1, 8, 1_000, 0)
    t.begin(2, 16, 500, 0)
    assert t.marks[1].began_ns == 1_000
    assert t.current.step == 2
