"""`locust-llm flags` lists every flag Locust's parser gets from locust-llm, with its env var and default."""

import json
import re
import subprocess
import sys

import pytest

from locust_llm.config.flags import FLAGS
from tests.support.procs import clean_env

# Building Locust's parser imports Locust (gevent patching): in a child process.
LOCUST_PARSER = """
import json, locust_llm
from locust.argument_parser import get_parser
locust_llm.install()
group = next(g for g in get_parser()._action_groups if g.title == "locust-llm")
print(json.dumps([[a.option_strings[0], getattr(a, "env_var", None), a.default] for a in group._group_actions]))
"""


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", *args], capture_output=True, text=True, timeout=60, env=clean_env()
    )


def test_flags_lists_every_flag_registered_on_locusts_parser_with_its_env_var():
    proc = subprocess.run(
        [sys.executable, "-c", LOCUST_PARSER], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    registered = json.loads(proc.stdout)
    assert len(registered) > 40, proc.stderr
    listing = cli("flags")
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    table = {flag.name: flag for flag in FLAGS}
    for name, env_var, default in registered:
        line = next((x for x in lines if x.startswith(f"  {name}  ")), None)
        assert line is not None, f"{name} is missing from 'locust-llm flags'"
        # repeatable flags read their env var themselves (it adds entries), the others through Locust's parser
        assert env_var == (None if table[name].multiple else table[name].env_var), name
        assert f"[env {table[name].env_var or '-'}]" in line, line
        if default:
            assert f"(default: {default})" in line, line


def test_flags_are_grouped_as_in_readme_and_the_simulator_is_listed():
    out = cli("flags").stdout
    groups = [
        "Endpoint and model",
        "Workload",
        "Client behaviour",
        "Steps and validity",
        "Reports, SLA and prices",
        "Regression gate",
        "Embedded simulator",
        "Simulator ('locust-llm sim'",
    ]
    positions = [out.index(g) for g in groups]
    assert positions == sorted(positions)
    assert "  --kv-blocks  [env LOCUST_LLM_SIM_KV_BLOCKS]" in out


@pytest.mark.slow  # a few seconds of subprocesses: the full suite only, out of the -m "not slow" loop
def test_help_texts_carry_no_rest_markup():
    for args in (["--help"], ["sim", "--help"], ["report", "--help"], ["compare", "--help"], ["trend", "--help"]):
        out = cli(*args).stdout
        assert "``" not in out and not re.search(r":\w+:`", out), (args, out)
    assert "locust_llm.reports.verdict" in cli("--help").stdout  # the role's text stays, its markup goes


def test_simulator_flags_read_their_env_vars():
    from locust_llm.sim.command import SIM_FLAGS

    env = clean_env(LOCUST_LLM_SIM_KV_BLOCKS="many")
    proc = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "sim", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2 and "--kv-blocks must be an integer, got 'many'" in proc.stderr
    assert all(f.env_var and f.env_var.startswith("LOCUST_LLM_SIM_") for f in SIM_FLAGS)
