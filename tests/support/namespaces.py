"""Commands run in Linux namespaces a test makes itself: a mount namespace whose /etc/hosts is the test's (so a name
resolves to the addresses the test chose, as a Kubernetes headless Service's does), never the machine's own.

Where namespaces cannot be made (no ``unshare``, no privilege), :func:`skip_unless_namespaces` skips with the reason;
with ``LOCUST_LLM_REQUIRE_NETNS`` set (CI, which runs as root) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def _why_not() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True, timeout=30)
    return None if probe.returncode == 0 else f"unshare --mount failed: {probe.stderr.strip()[:200]}"


def skip_unless_namespaces() -> None:
    why = _why_not()
    if why is None:
        return
    if os.environ.get("LOCUST_LLM_REQUIRE_NETNS"):
        pytest.fail(f"namespaces are required here (LOCUST_LLM_REQUIRE_NETNS is set) but {why}")
    pytest.skip(why)


def with_hosts(hosts: Path, cmd: list[str]) -> list[str]:
    """``cmd`` in a new mount namespace whose /etc/hosts is ``hosts``."""
    return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), *cmd]
