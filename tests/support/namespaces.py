"""Commands run in Linux namespaces a test makes itself: a mount namespace whose /etc/hosts is the test's (so a name
resolves to the addresses the test chose, as a Kubernetes headless Service's does), never the machine's own; and
network namespaces joined by a bridge, so that master, workers and server are separate hosts (:func:`hosts`).

Where namespaces cannot be made (no ``unshare``, no privilege), :func:`skip_unless_namespaces` skips with the reason;
with ``LOCUST_LLM_REQUIRE_NETNS`` set (CI, which runs as root) it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
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


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def skip_unless_netns() -> None:
    """Like :func:`skip_unless_namespaces`, for network namespaces (``ip netns``: root)."""
    why = None if shutil.which("ip") else "ip (iproute2) is not installed"
    if why is None:
        probe = subprocess.run(["ip", "netns", "add", f"llt-probe-{os.getpid()}"], capture_output=True, text=True)
        if probe.returncode:
            why = f"ip netns add failed: {probe.stderr.strip()[:200]}"
        else:
            subprocess.run(["ip", "netns", "del", f"llt-probe-{os.getpid()}"], capture_output=True, timeout=30)
    if why is None:
        return
    if os.environ.get("LOCUST_LLM_REQUIRE_NETNS"):
        pytest.fail(f"network namespaces are required here (LOCUST_LLM_REQUIRE_NETNS is set) but {why}")
    pytest.skip(why)


@contextlib.contextmanager
def hosts(*names: str) -> Iterator[dict[str, tuple[str, str]]]:
    """One network namespace per name, each with one address on a bridge of their own (10.231.0.x/24, in a hub
    namespace), as separate machines on one network: ``{name: (namespace, address)}``; all removed afterwards."""
    tag = f"llt{os.getpid() % 100000}"
    hub = f"{tag}-hub"
    made = [hub]
    try:
        _ip("netns", "add", hub)
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        out = {}
        for i, name in enumerate(names, start=1):
            ns, inner, outer, address = f"{tag}-{name}", f"v{i}", f"h{i}", f"10.231.0.{i}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", hub, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
            _ip("-n", hub, "link", "set", outer, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            out[name] = (ns, address)
        yield out
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def inside(namespace: str, cmd: list[str]) -> list[str]:
    """``cmd`` run in network namespace ``namespace``."""
    return ["ip", "netns", "exec", namespace, *cmd]
