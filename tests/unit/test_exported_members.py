import subprocess
import sys

import locust_llm

# Resolving the Locust-facing names imports Locust, which monkey-patches the process with gevent: do it in a
# child process so this test run stays unpatched.
CHECK = """
import locust_llm
missing = [n for n in locust_llm.__all__ if getattr(locust_llm, n, None) is None]
assert not missing, missing
assert sorted(dir(locust_llm)) == sorted(locust_llm.__all__)
print("ok")
"""


def test_all_exports_resolve():
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_unknown_names_raise_attribute_error():
    try:
        locust_llm.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_package_does_not_import_locust():
    code = "import sys, locust_llm, locust_llm.sim.server; print('locust' in sys.modules, 'gevent' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
