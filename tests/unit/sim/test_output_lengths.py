"""The simulator's output lengths: a model that stops early at a known share, and requests that ask for a minimum
(``min_tokens``, ``ignore_eos``) honoured, ignored or refused as real servers do."""

import dataclasses
import random

import orjson
import pytest

from locust_llm.sim.presets import SimConfig, preset
from locust_llm.sim.replicas import ModelRuntime
from locust_llm.sim.request import BadRequest, parse_chat_request
from locust_llm.sim.timing import EmissionError

CONTEXTS = {"m": 4096}


def parse(mode, **fields):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, **fields}
    return parse_chat_request(orjson.dumps(body), CONTEXTS, "auto", mode)


def test_a_minimum_is_honoured_as_vllm_does_ignored_or_refused_as_openai_does():
    assert parse("honour").min_tokens == 0
    assert parse("honour", min_tokens=20).min_tokens == 20
    assert parse("honour", min_tokens=99).min_tokens == 32  # never past max_tokens
    assert parse("honour", ignore_eos=True).min_tokens == 32  # runs to max_tokens
    assert parse("honour", min_tokens=4, ignore_eos=False).min_tokens == 4
    assert parse("ignore", min_tokens=20, ignore_eos=True).min_tokens == 0
    with pytest.raises(BadRequest, match="Unrecognized request argument supplied: min_tokens") as refused:
        parse("reject", min_tokens=20)
    assert refused.value.status == 400 and refused.value.param == "min_tokens"
    assert parse("reject").min_tokens == 0  # a request without them is served
    for bad in ({"min_tokens": -1}, {"min_tokens": "8"}, {"min_tokens": True}, {"ignore_eos": "yes"}):
        with pytest.raises(BadRequest, match=r"Invalid '(min_tokens|ignore_eos)'"):
            parse("honour", **bad)


def runtime(fraction):
    spec = dataclasses.replace(preset("default")[0], output_fraction=fraction)
    return ModelRuntime(spec, SimConfig(models=(spec,)), EmissionError())


@pytest.mark.parametrize("minimum", [0, 10, 16, 20, 31, 32])
def test_the_truths_mean_output_is_the_mean_of_the_lengths_drawn(minimum):
    """Each length uniform in [16, 32] (a model stopping at EOS), raised to the request's minimum: the truth's mean
    is the mean of every seeded draw, to the rounding of one token."""
    model = runtime(0.5)
    drawn = [model.output_tokens(seq_id, 32, minimum) for seq_id in range(20_000)]
    assert min(drawn) == max(16, minimum) and max(drawn) == 32
    assert abs(model.mean_output(32, minimum) - sum(drawn) / len(drawn)) <= 0.6
    assert runtime(1.0).output_tokens(random.randrange(1000), 32, minimum) == 32  # a fixed length stays fixed
