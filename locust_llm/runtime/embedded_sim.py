"""The embedded simulator: a child process, the target of a run without ``--host``.

It runs in its own session, so a Ctrl-C reaches Locust, which stops it in order; it exits by itself when its parent
disappears, so even a killed Locust leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["EmbeddedSim", "SimStartError"]

_READY = re.compile(r"listening on (https?://\S+)")
_CA = re.compile(r"TLS CA: (\S.*)$")


class SimStartError(RuntimeError):
    pass


class EmbeddedSim:
    def __init__(self, extra_args: list[str] | None = None, host: str = "127.0.0.1") -> None:
        self.extra_args = list(extra_args or [])
        self.host = host
        self.url: str | None = None
        self.ca_path: str | None = None  # --sim-args --tls: the CA file to trust
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "locust_llm.sim",
            "--host",
            self.host,
            "--port",
            "0",
            "--parent-pid",
            str(os.getpid()),
            *self.extra_args,
        ]

    def start(self, timeout_s: float = 30.0) -> str:
        """Start the simulator and return its base URL (``http://127.0.0.1:PORT/v1``; ``https://`` with ``--tls``,
        and :attr:`ca_path` set)."""
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, start_new_session=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while time.monotonic() < deadline:
            line = self._readline(deadline - time.monotonic())
            if not line:
                break
            text = line.decode("utf-8", "replace").strip()
            if ca := _CA.search(text):
                self.ca_path = ca.group(1)
            match = _READY.search(text)
            if match:
                self.url = match.group(1)
                return self.url
        try:
            code: int | None = self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            code = None
        self.stop()
        if code is not None:
            raise SimStartError(f"the embedded simulator exited with code {code} before it was ready")
        raise SimStartError(f"the embedded simulator did not start within {timeout_s:g} s")

    def models(self, timeout_s: float = 10.0) -> list[str]:
        """Ids of the models the running simulator serves (``GET /v1/models``)."""
        return [m["id"] for m in self._get("/v1/models", timeout_s)["data"]]

    def truth(
        self, model: str, prompt_tokens: int, max_tokens: int, timeout_s: float = 30.0, **open_loop: Any
    ) -> dict[str, Any]:
        """The simulator's analytic truth for this workload (``GET /sim/truth``), or ``{"error": ...}``; with
        ``rate``, ``arrivals`` and ``seed``, what an open loop at that rate should see."""
        query = urllib.parse.urlencode(
            {"model": model, "prompt_tokens": prompt_tokens, "max_tokens": max_tokens, **open_loop}
        )
        try:
            return dict(self._get(f"/sim/truth?{query}", timeout_s))
        except (OSError, ValueError) as exc:
            return {"error": f"could not read the simulator's truth: {exc}"}

    def _get(self, path: str, timeout_s: float) -> Any:
        assert self.url is not None
        origin = self.url.rsplit("/v1", 1)[0]
        context = ssl.create_default_context(cafile=self.ca_path) if self.ca_path else None
        with urllib.request.urlopen(origin + path, timeout=timeout_s, context=context) as resp:
            return json.load(resp)

    def _readline(self, timeout_s: float) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        try:
            import gevent

            with gevent.Timeout(max(0.01, timeout_s), False):
                return self.process.stdout.readline()
            return b""
        except ImportError:  # pragma: no cover - outside gevent the blocking read is fine
            return self.process.stdout.readline()

    def stop(self, timeout_s: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
