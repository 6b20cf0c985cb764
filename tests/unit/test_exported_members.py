import subprocess
import sys

import locust_llm


def test_all_exports_resolve():
    for name in locust_llm.__all__:
        assert getattr(locust_llm, name) is not None, name
    assert sorted(dir(locust_llm)) == sorted(locust_llm.__all__)


def test_importing_the_package_does_not_import_locust():
    code = "import sys, locust_llm, locust_llm.sim.server; print('locust' in sys.modules, 'gevent' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
