"""The Dockerfile, read statically (no Docker engine runs here): what the manifests rely on is what it builds."""

import re

from tests.k8s.conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()
STAGES = re.split(r"(?m)^FROM ", DOCKERFILE)[1:]
FINAL = STAGES[-1]


def test_multi_stage_with_a_pinned_python_base():
    assert len(STAGES) == 2
    base = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE).group(1)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base), base
    assert "COPY --from=build /opt/venv /opt/venv" in FINAL


def test_the_final_stage_runs_as_a_non_root_user_without_build_tools():
    user = re.search(r"(?m)^USER (\d+)(?::(\d+))?$", FINAL)
    assert user and int(user.group(1)) != 0
    assert not re.search(r"(?i)apt-get install|gcc|build-essential|pip install", FINAL)
    assert "10001" in (ROOT / "k8s" / "base" / "master-job.yaml").read_text()  # the manifests use that uid


def test_entrypoint_is_locust_and_the_locustfiles_are_where_the_manifests_look():
    assert 'ENTRYPOINT ["locust"]' in FINAL
    assert "COPY locustfile.py locustfile_sdk.py /app/" in FINAL
    for manifest in (ROOT / "k8s").rglob("*.yaml"):
        for path in re.findall(r"/app/[\w.]+", manifest.read_text()):
            assert (ROOT / path.removeprefix("/app/")).exists(), (manifest, path)
