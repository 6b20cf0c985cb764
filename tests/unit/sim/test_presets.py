import argparse

import pytest

from locust_llm.sim.command import add_arguments, config_from_args
from locust_llm.sim.presets import PRESETS, parse_decode_table, preset


def args(*argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds(name):
    models = preset(name)
    assert models and len({m.name for m in models}) == len(models)


def test_flags_override_the_first_model_and_pacing_flags_select_the_pacing_engine():
    config = config_from_args(args("--ttft-ms", "150", "--itl-ms", "10", "--capacity", "64", "--model", "x"))
    first = config.models[0]
    assert (first.name, first.engine, first.pacing.ttft_ms, first.pacing.capacity) == ("x", "pacing", 150.0, 64)


def test_add_model_copies_the_first_with_changes():
    config = config_from_args(args("--preset", "small-gpu", "--add-model", "b:max_batch=4,max_concurrent=3"))
    a, b = config.models
    assert b.name == "b" and b.batch.max_batch == 4 and b.limits.max_concurrent == 3
    assert b.batch.kv_blocks == a.batch.kv_blocks


def test_decode_table_flag():
    config = config_from_args(args("--decode-ms", "4:10,8:12", "--kv-blocks", "300"))
    assert config.models[0].batch.decode_table == ((4, 10.0), (8, 12.0))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--kv-blocks", "many"], "--kv-blocks"),
        (["--decode-ms", "8-12"], "decode table entries are BATCH:MS"),
        (["--add-model", "m:colour=blue"], "unknown model setting 'colour'"),
        (["--fault", "teapot"], "unknown fault kind"),
        (["--kv-blocks", "10", "--context-tokens", "2048"], "does not fit the KV cache"),
    ],
)
def test_bad_values_raise_readable_errors(argv, message):
    with pytest.raises(ValueError, match=message):
        config_from_args(args(*argv))


def test_parse_decode_table():
    assert parse_decode_table("1:2.5, 2:3") == ((1, 2.5), (2, 3.0))


def test_a_smaller_cache_shrinks_the_context_unless_it_was_set():
    assert config_from_args(args("--kv-blocks", "40")).models[0].context_tokens == 40 * 16  # 1% of 40 rounds to 0
