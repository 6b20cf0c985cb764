"""The fast path's assumptions hold for the installed libraries, and a change is caught and named.

Locust monkey-patches the interpreter on import, so the check runs in its own process.
"""

import subprocess
import sys

CHECK = """
import sys
from locust_llm.runtime import contract
{patch}
broken = contract.check()
print("\\n".join(broken) if broken else "ok")
"""


def run(patch=""):
    proc = subprocess.run([sys.executable, "-c", CHECK.format(patch=patch)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()


def test_every_assumption_of_the_fast_path_holds_for_the_installed_libraries():
    assert run() == ["ok"]


def test_a_private_name_that_went_away_is_named():
    patch = "import geventhttpclient\ndel geventhttpclient.HTTPClient._build_request"
    assert run(patch) == ["geventhttpclient: HTTPClient._build_request is missing"]


def test_a_change_of_what_locust_logs_per_request_is_caught():
    patch = (
        "import locust.stats\n"
        "log = locust.stats.StatsEntry.log\n"
        "def counted_twice(self, response_time, content_length):\n"
        "    log(self, response_time, content_length)\n"
        "    self.num_requests += 1\n"
        "locust.stats.StatsEntry.log = counted_twice"
    )
    assert run(patch) == ["locust: StatsEntry.log changed: logging a request's gaps at once no longer matches it"]


def test_the_line_a_run_prints_names_what_changed_and_the_path_taken():
    from locust_llm.runtime.contract import describe

    line = describe(["gevent: gevent._socket3.socket is missing"])
    assert "gevent._socket3.socket is missing" in line and "--fast-path off" in line and "\n" not in line


def test_a_csv_writer_attribute_the_final_write_uses_is_named_when_it_went_away():
    patch = "import locust.stats\ndel locust.stats.StatsCSVFileWriter.stats_history_flush"
    assert run(patch) == ["locust: StatsCSVFileWriter().stats_history_flush is missing"]


def test_the_sdks_private_hook_is_checked_when_the_sdk_user_is_loaded():
    patch = "import locust_llm.users.sdk, openai._base_client as b\ndel b.BaseClient._make_sse_decoder"
    assert run(patch) == ["openai: openai.OpenAI._make_sse_decoder is missing"]
    assert run("import openai._base_client as b\ndel b.BaseClient._make_sse_decoder") == [
        "ok"
    ]  # no SDK user: not its concern
