"""The manifests, rendered as kubectl would apply them: valid for two Kubernetes versions, and the rules that the
schemas do not check."""

import re
import shlex
import shutil

import kubernetes_validate
import pytest
from croniter import croniter

from tests.k8s.conftest import OVERLAYS, ROOT, render

VERSIONS = ("1.30", "1.33")
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def job_specs(docs):
    """(name, job spec) of every Job and of every CronJob's job template."""
    out = [(d["metadata"]["name"], d["spec"]) for d in of_kind(docs, "Job")]
    out += [(d["metadata"]["name"], d["spec"]["jobTemplate"]["spec"]) for d in of_kind(docs, "CronJob")]
    return out


def pods(docs):
    return [(name, spec["template"]) for name, spec in job_specs(docs)]


def containers(docs):
    for name, template in pods(docs):
        for container in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
            yield name, template, container


def command_line(container):
    return " ".join([*container.get("command", []), *container.get("args", [])])


def is_master(container):
    return re.search(r"(^|\s)--master(\s|$)", command_line(container)) is not None


SECRET_NAME = re.compile(r"(?i)api_?key|secret|password|(^|_)token$")


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_document_is_valid_against_the_kubernetes_schema(rendered, overlay, version):
    for doc in rendered[overlay]:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_jobs_never_restart(rendered, overlay):
    specs = job_specs(rendered[overlay])
    assert specs
    for name, spec in specs:
        assert spec["backoffLimit"] == 0, name
        assert spec["template"]["spec"]["restartPolicy"] == "Never", name


def settings_of(docs, container):
    """The environment a container gets from its ConfigMaps (envFrom)."""
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    env = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    return env


def expected_workers(docs, master):
    """The master's --expect-workers: in its arguments, or from its ConfigMap (LOCUST_EXPECT_WORKERS)."""
    given = re.search(r"--expect-workers[= ](\d+)", command_line(master))
    return int(given.group(1)) if given else int(settings_of(docs, master)["LOCUST_EXPECT_WORKERS"])


def masters_of(docs):
    masters = [c for _, _, c in containers(docs) if is_master(c)]
    assert len(masters) == 1
    return masters[0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_expect_workers_equals_the_worker_parallelism(rendered, overlay):
    docs = rendered[overlay]
    expected = expected_workers(docs, masters_of(docs))
    jobs = dict(job_specs(docs))
    if "locust-llm-worker" in jobs:
        assert jobs["locust-llm-worker"]["parallelism"] == expected
        assert jobs["locust-llm-worker"]["completions"] == expected
    else:  # one Indexed Job: index 0 is the master, the others are workers
        (spec,) = jobs.values()
        assert spec["completionMode"] == "Indexed" and spec["parallelism"] - 1 == expected


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlays_largest_step_fits_its_fleet(rendered, overlay):
    """Where an overlay states users per worker, its master would refuse steps beyond the fleet: none is."""
    docs = rendered[overlay]
    master = masters_of(docs)
    settings = settings_of(docs, master)
    per_worker = int(settings.get("LOCUST_LLM_MAX_USERS_PER_WORKER", 0))
    if per_worker:
        steps = [int(s) for s in settings["LOCUST_LLM_STEPS"].split(",")]
        assert max(steps) <= expected_workers(docs, master) * per_worker


def test_the_capacity_fleet_is_sized_by_one_number(tmp_path):
    """Changing LOCUST_EXPECT_WORKERS alone moves the master's wait and the worker Job's size together."""
    shutil.copytree(ROOT / "k8s", tmp_path / "k8s")
    kustomization = tmp_path / "k8s" / "overlays" / "capacity" / "kustomization.yaml"
    text = kustomization.read_text()
    assert "LOCUST_EXPECT_WORKERS=4" in text
    kustomization.write_text(text.replace("LOCUST_EXPECT_WORKERS=4", "LOCUST_EXPECT_WORKERS=20"))
    docs = render("capacity", tmp_path)
    worker = dict(job_specs(docs))["locust-llm-worker"]
    assert expected_workers(docs, masters_of(docs)) == worker["parallelism"] == worker["completions"] == 20


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_select_the_master_pod(rendered, overlay):
    docs = rendered[overlay]
    for service in of_kind(docs, "Service"):
        if service["metadata"]["name"] == "vllm-pods":
            continue  # the server's own headless Service (test_server_metrics_name_a_headless_service)
        selector = dict(service["spec"]["selector"])
        matched = []
        for name, template in pods(docs):
            labels = dict(template["metadata"]["labels"])
            spec = dict(job_specs(docs))[name]
            if spec.get("completionMode") == "Indexed" and selector.get(INDEX_LABEL) == "0":
                labels[INDEX_LABEL] = "0"  # Kubernetes adds it to the pod of index 0
            if selector.items() <= labels.items():
                matched.append((name, template))
        assert len(matched) == 1, (service["metadata"]["name"], selector)
        name, template = matched[0]
        ports = {
            p["containerPort"]
            for c in template["spec"]["containers"] + template["spec"].get("initContainers", [])
            for p in c.get("ports", [])
        }
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
        assert any(is_master(c) for c in template["spec"]["containers"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_key_comes_from_the_secret_and_never_inline(rendered, overlay):
    docs = rendered[overlay]
    assert not of_kind(docs, "Secret")
    refs = []
    for _, _, container in containers(docs):
        for env in container.get("env", []):
            if SECRET_NAME.search(env["name"]):
                assert "value" not in env, env
                refs.append(env["valueFrom"]["secretKeyRef"])
        assert not re.search(r"--api-key", command_line(container))
    assert refs and all(r["name"] == "locust-llm-api-key" and r["key"] == "OPENAI_API_KEY" for r in refs)
    for config_map in of_kind(docs, "ConfigMap"):
        assert not any(SECRET_NAME.search(k) for k in config_map.get("data", {}))


def test_the_capacity_and_nightly_runs_require_the_secret_and_the_smoke_run_does_not(rendered):
    for overlay, optional in (("capacity", False), ("nightly", None), ("smoke", True)):
        for _, _, container in containers(rendered[overlay]):
            for env in container.get("env", []):
                assert env["valueFrom"]["secretKeyRef"].get("optional") == optional, overlay


def test_cron_schedules_are_valid_and_not_on_the_hour(rendered):
    (cron,) = of_kind(rendered["nightly"], "CronJob")
    schedule = cron["spec"]["schedule"]
    assert croniter.is_valid(schedule) and schedule.split()[0] not in ("0", "*")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_pinned(rendered, overlay):
    for _, _, container in containers(rendered[overlay]):
        image = container["image"]
        assert "@sha256:" in image or re.fullmatch(r"[\w./-]+:(?!latest$)[\w.-]+", image), image


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_security_context_and_resources(rendered, overlay):
    for name, template, container in containers(rendered[overlay]):
        pod = template["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["enableServiceLinks"] is False, name
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]) <= set(container["resources"]["limits"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_results_are_written_to_a_volume_and_the_summary_logged(rendered, overlay):
    docs = rendered[overlay]
    (master,) = [(t, c) for _, t, c in containers(docs) if is_master(c)]
    template, container = master
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    line = command_line(container)
    for flag in ("--csv", "--llm-report"):
        path = re.search(rf"{flag}[= ](\S+)", line).group(1).strip('"')
        for name, value in re.findall(r'(\w+)="([^"$]*)', line):  # a shell variable set in the script: its prefix
            path = path.replace(f"${name}", value)
        assert any(path.startswith(mount + "/") for mount in mounts), (flag, path)
    config = {k: v for cm in of_kind(docs, "ConfigMap") for k, v in cm["data"].items()}
    assert config["LOCUST_LLM_SUMMARY_LOG"] == "on"
    if overlay != "smoke":
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert "persistentVolumeClaim" in volumes[mounts["/results"]]
        assert of_kind(docs, "PersistentVolumeClaim")


def test_nightly_script_is_valid_shell_and_runs_master_and_worker():
    import subprocess

    from tests.k8s.conftest import render

    (cron,) = of_kind(render("nightly"), "CronJob")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    script = container["args"][0]
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    assert "--master" in script and "--worker" in script and "JOB_COMPLETION_INDEX" in script
    assert shlex.split(script.split("--master-host=")[1])[0] == "locust-llm-nightly-master"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_server_metrics_name_a_headless_service(rendered, overlay):
    """A ``dns+http://NAME:PORT`` --server-metrics names a headless Service the overlay renders, at its port: the name
    resolves to one A record per ready pod only when ``clusterIP`` is None."""
    docs = rendered[overlay]
    (master,) = [c for _, _, c in containers(docs) if is_master(c)]
    setting = settings_of(docs, master).get("LOCUST_LLM_SERVER_METRICS", "auto")
    match = re.fullmatch(r"dns\+https?://([^.:/]+)\.([^.:/]+)\.svc\.cluster\.local:(\d+)/metrics", setting)
    if overlay != "fleet":
        assert not setting.startswith("dns+"), setting
        return
    assert match, setting
    name, namespace, port = match.groups()
    (service,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == name]
    assert service["metadata"]["namespace"] == namespace and service["spec"]["clusterIP"] == "None"
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
