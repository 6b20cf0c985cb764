"""Trust and proxy resolution (locust_llm.config.tls), with real certificates from the simulator's generator."""

import os
import ssl
from pathlib import Path

import pytest

from locust_llm.config.parsers import ConfigError
from locust_llm.config.tls import proxy_for, proxy_secrets, tls_from
from locust_llm.sim.certs import make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(str(tmp_path_factory.mktemp("certs")))


def test_the_flag_wins_then_requests_order_then_ssl_cert_file(certs, tmp_path):
    other = tmp_path / "other.pem"
    other.write_bytes(Path(certs.ca_path).read_bytes())
    env = {"REQUESTS_CA_BUNDLE": str(other), "CURL_CA_BUNDLE": "/missing", "SSL_CERT_FILE": "/missing"}
    assert tls_from(certs.ca_path, False, env).ca_source == "--ca-bundle"
    chosen = tls_from(None, False, env)
    assert (chosen.ca_bundle, chosen.ca_source) == (str(other), "REQUESTS_CA_BUNDLE")
    assert tls_from(None, False, {"CURL_CA_BUNDLE": str(other), "SSL_CERT_FILE": "/x"}).ca_source == "CURL_CA_BUNDLE"
    assert tls_from(None, False, {"SSL_CERT_FILE": certs.ca_path}).ca_source == "SSL_CERT_FILE"
    assert tls_from(None, False, {"REQUESTS_CA_BUNDLE": "  "}).ca_bundle is None  # blank is unset
    assert tls_from(None, False, {}).context() is None  # nothing named: the client's default trust


@pytest.mark.parametrize("kind", ["missing", "directory", "not pem", "unreadable"])
def test_a_bad_bundle_is_one_line_naming_where_it_came_from(tmp_path, kind):
    path = tmp_path / "bundle.pem"
    if kind == "directory":
        path.mkdir()
    elif kind == "not pem":
        path.write_text("hello\n")
    elif kind == "unreadable":
        path.write_text("x")
        path.chmod(0)
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who can read anything")
    with pytest.raises(ConfigError) as err:
        tls_from(None, False, {"REQUESTS_CA_BUNDLE": str(path)})
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"REQUESTS_CA_BUNDLE names {str(path)!r}") and "allowed" in text


def test_contexts_verify_with_the_bundle_and_insecure_verifies_nothing(certs):
    verified = tls_from(certs.ca_path, False, {}).context()
    assert verified is not None and verified.verify_mode == ssl.CERT_REQUIRED and verified.check_hostname
    assert len(verified.get_ca_certs()) == 1  # the bundle replaces the default trust
    insecure = tls_from(None, True, {}).context()
    assert insecure is not None and insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
    factory = tls_from(certs.ca_path, False, {}).context_factory()
    assert factory is not None and factory(cafile="/ignored") is verified  # one shared context per process


def test_proxies_follow_the_scheme_and_no_proxy():
    env = {
        "HTTPS_PROXY": "http://user:p%40ss@proxy.local:3128",
        "http_proxy": "proxy2:8080",
        "NO_PROXY": "skip.me,.corp",
    }
    proxy = proxy_for("https://api.x.ai/v1", env)
    assert (proxy.host, proxy.port, proxy.user, proxy.password) == ("proxy.local", 3128, "user", "p@ss")
    assert proxy.describe() == "http://proxy.local:3128" and "p%40ss" in proxy.url()
    assert proxy_for("http://vllm:8000/v1", env).describe() == "http://proxy2:8080"
    assert proxy_for("https://skip.me/v1", env) is None and proxy_for("https://gpu.corp:443/v1", env) is None
    assert proxy_for("https://api.x.ai/v1", {}) is None
    assert proxy_for("https://api.x.ai/v1", {**env, "https_proxy": "http://low:1"}).host == "low"  # lower case wins
    assert set(proxy_secrets(env)) == {"p%40ss", "p@ss"}


def test_a_proxy_that_is_not_http_is_refused():
    with pytest.raises(ConfigError, match="HTTPS_PROXY environment variable names a socks5:// proxy"):
        proxy_for("https://api.x.ai/v1", {"HTTPS_PROXY": "socks5://h:1080"})
