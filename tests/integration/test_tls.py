"""HTTPS end to end: the simulator serving TLS with its own CA (``sim --tls``), trusted, untrusted, insecure, proxied.

The pacing simulator answers with TTFT 50 ms and ITL 10 ms below its capacity: the truth the TLS runs are held to.
A keep-alive connection is reused, so no steady-state request pays a handshake: the TTFT p50 stays within a few
milliseconds of the truth, and no reconnect is counted.
"""

import base64
import json
import sys

import pytest

from tests.support.connect_proxy import connect_proxy
from tests.support.procs import ROOT, clean_env, read_csv, run_locust, server

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 16
SWEEP = (
    "--headless",
    "--model",
    "sim-llm",
    "--steps",
    "2,4",
    "--step-duration",
    "5s",
    "--warmup",
    "2s",
    "--max-tokens",
    str(TOKENS),
)


def short(duration: str) -> tuple[str, ...]:
    """One step of 2 users."""
    return (*SWEEP[:4], "2", "--step-duration", duration, "--warmup", "1s", "--max-tokens", str(TOKENS))


@pytest.fixture(scope="module")
def tls_sim(tmp_path_factory):
    certs = tmp_path_factory.mktemp("certs")
    cmd = (
        sys.executable,
        "-m",
        "locust_llm.sim",
        "--port",
        "0",
        "--tls",
        "--tls-dir",
        str(certs),
        "--ttft-ms",
        f"{TTFT_MS:g}",
        "--itl-ms",
        f"{ITL_MS:g}",
        "--capacity",
        "16",
    )
    with server(*cmd, ready=r"listening on (https://\S+)") as url:
        yield url, str(certs / "sim-ca.pem")


@pytest.fixture(scope="module")
def trusted_sweep(tls_sim, tmp_path_factory):
    url, ca = tls_sim
    out = tmp_path_factory.mktemp("trusted")
    proc = run_locust(*SWEEP, "--host", url, "--ca-bundle", ca, "--csv", str(out / "run"), cwd=out)
    return proc, out


def test_a_whole_sweep_runs_over_tls_with_the_ca_bundle(trusted_sweep, tls_sim):
    proc, out = trusted_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_csv(out / "run_llm_steps.csv")
    assert [r["users"] for r in rows] == ["2", "4"]
    for row in rows:
        assert int(row["requests"]) > 0 and int(row["errors"]) == 0 and int(row["reconnects"]) == 0
        # keep-alive over TLS: the steady window pays no handshake (plain HTTP's band, widened for decryption)
        assert TTFT_MS - 2 <= float(row["ttft_p50_ms"]) <= TTFT_MS + 15
        assert ITL_MS * 0.9 <= float(row["itl_p50_ms"]) <= ITL_MS + 5
    tls = json.loads((out / "run_llm_summary.json").read_text())["run"]["settings"]["tls"]
    assert tls == {"ca_bundle": tls_sim[1], "ca_source": "--ca-bundle", "insecure": False}


def test_an_untrusted_certificate_stops_the_run_at_once_with_one_clear_line(tls_sim, tmp_path):
    url, _ = tls_sim
    proc = run_locust(*SWEEP, "--host", url, "--csv", str(tmp_path / "run"), cwd=tmp_path, timeout_s=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert len(errors) == 1 and "TLS handshake failed" in errors[0] and "--ca-bundle FILE" in errors[0]
    assert "CERTIFICATE_VERIFY_FAILED" in errors[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "run_llm_steps.csv").exists() or len(read_csv(tmp_path / "run_llm_steps.csv")) == 0


def test_insecure_works_warns_once_and_is_recorded(tls_sim, tmp_path):
    url, _ = tls_sim
    proc = run_locust(*short("4s"), "--host", url, "--insecure", "--csv", str(tmp_path / "run"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("--insecure: TLS certificates and host names are NOT verified") == 1
    assert int(read_csv(tmp_path / "run_llm_steps.csv")[0]["requests"]) > 0
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    assert summary["run"]["settings"]["tls"]["insecure"] is True
    assert "--insecure: the endpoint's TLS certificate and host name were NOT verified" in proc.stdout
    assert "were NOT verified" in (tmp_path / "run_llm_report.html").read_text()


@pytest.mark.parametrize("path", ["auto", "off"])
def test_requests_ca_bundle_is_honoured_before_ssl_cert_file_and_a_proxy_carries_the_tunnel(tls_sim, tmp_path, path):
    url, ca = tls_sim
    with connect_proxy() as proxy:
        with_auth = proxy.url.replace("http://", "http://bench:s3cr%40t@")
        env = clean_env(REQUESTS_CA_BUNDLE=ca, SSL_CERT_FILE="/nonexistent.pem", HTTPS_PROXY=with_auth, NO_PROXY="")
        proc = run_locust(
            *short("4s"), "--host", url, "--fast-path", path, "--csv", str(tmp_path / "run"), cwd=tmp_path, env=env
        )
        tunnels, auth = list(proxy.tunnels), list(proxy.auth)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(auth) == {"Basic " + base64.b64encode(b"bench:s3cr@t").decode()}  # the credentials reach the proxy
    outputs = proc.stdout + proc.stderr + "".join(p.read_text() for p in tmp_path.glob("run*") if p.is_file())
    assert "s3cr" not in outputs  # ... and nothing else
    settings = json.loads((tmp_path / "run_llm_summary.json").read_text())["run"]["settings"]
    assert settings["tls"]["ca_source"] == "REQUESTS_CA_BUNDLE"
    port = url.split(":")[2].split("/")[0]
    assert tunnels and set(tunnels) == {f"127.0.0.1:{port}"}  # the preflight and the users, all through the proxy
    # kept alive: a connection per user (2), the preflight's, and one for each read of the target (its start and
    # end), not one per request
    assert len(tunnels) <= 4 + 2, tunnels
    assert "go through the proxy http://127.0.0.1:" in proc.stderr


def test_no_proxy_bypasses_it(tls_sim, tmp_path):
    url, ca = tls_sim
    with connect_proxy() as proxy:
        env = clean_env(HTTPS_PROXY=proxy.url, NO_PROXY="127.0.0.1")
        proc = run_locust(
            *short("3s"), "--host", url, "--ca-bundle", ca, "--csv", str(tmp_path / "run"), cwd=tmp_path, env=env
        )
        tunnels = list(proxy.tunnels)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tunnels == [] and int(read_csv(tmp_path / "run_llm_steps.csv")[0]["requests"]) > 0


def test_a_missing_ca_bundle_is_one_line_and_exit_2(tmp_path):
    proc = run_locust("--headless", "--ca-bundle", str(tmp_path / "nope.pem"), cwd=tmp_path, timeout_s=60)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert len(errors) == 1 and "--ca-bundle names" in errors[0] and "not a file" in errors[0]


def test_the_embedded_simulator_over_tls_is_trusted_by_itself(tmp_path):
    proc = run_locust(
        *short("3s"), "--sim-args", "--tls --ttft-ms 50 --itl-ms 10", "--csv", str(tmp_path / "run"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "run_llm_summary.json").read_text())["run"]
    assert run["host"].startswith("https://127.0.0.1:") and run["settings"]["tls"]["ca_source"] == "--ca-bundle"
    assert int(read_csv(tmp_path / "run_llm_steps.csv")[0]["requests"]) > 0


def test_the_sdk_user_trusts_the_same_bundle(tls_sim, tmp_path):
    url, ca = tls_sim
    proc = run_locust(
        *short("4s"),
        "--host",
        url,
        "--ca-bundle",
        ca,
        "--csv",
        str(tmp_path / "run"),
        cwd=tmp_path,
        locustfile=ROOT / "locustfile_sdk.py",
    )
    # what is checked is trust, not validity: the SDK user's CPU can make a loaded CI machine's step invalid (exit 3)
    assert proc.returncode == 0 or (proc.returncode == 3 and "the measurement is invalid" in proc.stdout), (
        proc.stdout[-2000:] + proc.stderr[-2000:]
    )
    row = read_csv(tmp_path / "run_llm_steps.csv")[0]
    assert int(row["requests"]) > 0 and int(row["errors"]) == 0
