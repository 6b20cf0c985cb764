"""Rendering the kustomize overlays (kubectl kustomize; .ci/run installs a pinned kubectl when none is here)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ("smoke", "capacity", "nightly", "fleet")


def kubectl() -> str:
    path = os.environ.get("LOCUST_LLM_KUBECTL") or shutil.which("kubectl")
    if path is None:
        if os.environ.get("LOCUST_LLM_REQUIRE_KUBECTL"):
            pytest.fail("kubectl is required here (LOCUST_LLM_REQUIRE_KUBECTL is set) but was not found")
        pytest.skip("kubectl is not installed (see .ci/run for a pinned one)")
    return path


def render(overlay: str, root: Path = ROOT) -> list[dict]:
    proc = subprocess.run(
        [kubectl(), "kustomize", str(root / "k8s" / "overlays" / overlay)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    return {overlay: render(overlay) for overlay in OVERLAYS}
