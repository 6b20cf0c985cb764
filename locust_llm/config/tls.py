"""Trust and proxies for HTTPS endpoints: ``--ca-bundle``, ``--insecure``, ``HTTPS_PROXY`` and ``NO_PROXY``. Pure.

As requests and the OpenAI SDK do: ``--ca-bundle``, else the first of ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE`` and
``SSL_CERT_FILE``, else the system's trust; a named bundle replaces the default and must be a readable PEM file.
``--insecure`` skips verification, never silently. ``https://`` endpoints go through ``HTTPS_PROXY`` (a ``CONNECT``
tunnel), ``http://`` ones through ``HTTP_PROXY``, unless ``NO_PROXY`` names the host; the embedded simulator is always
reached directly.
"""

from __future__ import annotations

import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from locust_llm.config.parsers import ConfigError

__all__ = ["CA_ENV_VARS", "Proxy", "TlsSettings", "client_kwargs", "proxy_for", "proxy_secrets", "tls_from"]

CA_ENV_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
"""Environment variables naming a CA bundle, in the order they are honoured after ``--ca-bundle``."""


@dataclass(frozen=True)
class TlsSettings:
    ca_bundle: str | None  # an absolute path, checked
    ca_source: str | None  # "--ca-bundle" or the environment variable it came from
    insecure: bool

    def describe(self) -> dict[str, Any]:
        return {"ca_bundle": self.ca_bundle, "ca_source": self.ca_source, "insecure": self.insecure}

    def context(self) -> ssl.SSLContext | None:
        """The client context for these settings, or None for the library's default trust."""
        if self.insecure:
            return _insecure_context()
        return _bundle_context(self.ca_bundle) if self.ca_bundle else None

    def context_factory(self) -> Callable[..., ssl.SSLContext] | None:
        """For geventhttpclient's ``ssl_context_factory``: one shared context per process, whatever it is asked."""
        context = self.context()
        return None if context is None else (lambda *args, **kwargs: context)

    def httpx_verify(self) -> ssl.SSLContext | bool:
        """For ``httpx.Client(verify=...)``: the context, or True for httpx's default trust."""
        return self.context() or True


def client_kwargs(tls: TlsSettings, proxy: Proxy | None) -> dict[str, Any]:
    """Keyword arguments of geventhttpclient's ``HTTPClient`` for this trust and proxy (every user, the preflight)."""
    kwargs: dict[str, Any] = {"insecure": tls.insecure}
    factory = tls.context_factory()
    if factory is not None:
        kwargs["ssl_context_factory"] = factory
    if proxy is not None:
        kwargs.update(
            proxy_host=proxy.host, proxy_port=proxy.port, proxy_user=proxy.user, proxy_password=proxy.password
        )
    return kwargs


def tls_from(flag_value: str | None, insecure: bool, environ: Mapping[str, str] | None = None) -> TlsSettings:
    """Resolve the CA bundle (see the module docstring) and check that it is a readable PEM bundle."""
    environ = os.environ if environ is None else environ
    path, source = (flag_value, "--ca-bundle") if flag_value else (None, None)
    for name in CA_ENV_VARS:
        if path:
            break
        if environ.get(name, "").strip():
            path, source = environ[name].strip(), name
    if not path:
        return TlsSettings(None, None, insecure)
    full = os.path.abspath(os.path.expanduser(path))
    where = f"{source} names {path!r}"
    if not os.path.isfile(full):
        raise ConfigError(f"{where}, which is not a file; allowed: a PEM file of CA certificates")
    if not os.access(full, os.R_OK):
        raise ConfigError(f"{where}, which cannot be read (permission denied); allowed: a readable PEM file")
    try:
        _bundle_context(full)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"{where}, which holds no usable PEM certificate ({exc.__class__.__name__}); allowed: "
            "a PEM file of CA certificates"
        ) from None
    return TlsSettings(full, source, insecure)


@cache
def _bundle_context(path: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=path)
    if not context.get_ca_certs():
        raise ValueError("no certificate")
    return context


@cache
def _insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    user: str | None
    password: str | None = None

    def describe(self) -> str:
        """Where requests go, without credentials."""
        return f"http://{self.host}:{self.port}"

    def url(self) -> str:
        """With credentials, for clients that take a proxy URL (httpx)."""
        if self.user is None:
            return self.describe()
        auth = urllib.parse.quote(self.user, safe="") + ":" + urllib.parse.quote(self.password or "", safe="")
        return f"http://{auth}@{self.host}:{self.port}"


def proxy_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The passwords of every ``*_PROXY`` variable (raw and decoded): kept out of every output like keys."""
    found: list[str] = []
    for value in _proxies(dict(os.environ if environ is None else environ)).values():
        password = urllib.parse.urlsplit(value if "://" in value else "http://" + value).password
        if password:
            found += [password, urllib.parse.unquote(password)]
    return tuple(dict.fromkeys(found))


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy that ``url`` should go through by the environment (see the module docstring), or None."""
    proxies = _proxies(dict(os.environ if environ is None else environ))
    parts = urllib.parse.urlsplit(url)
    proxy = proxies.get(parts.scheme)
    if not proxy or not parts.hostname or _bypass(parts, proxies.get("no", "")):
        return None
    p = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
    if p.scheme not in ("http", ""):
        raise ConfigError(
            f"the {parts.scheme.upper()}_PROXY environment variable names a {p.scheme}:// proxy; "
            "allowed: an http:// proxy (CONNECT for https endpoints)"
        )
    if not p.hostname:
        raise ConfigError(f"the {parts.scheme.upper()}_PROXY environment variable holds no proxy host")
    user = urllib.parse.unquote(p.username) if p.username else None
    password = urllib.parse.unquote(p.password) if p.password else None
    return Proxy(p.hostname, p.port or 80, user, password)


def _proxies(env: dict[str, str]) -> dict[str, str]:
    """``{"https": ..., "no": ...}`` from ``*_PROXY`` variables; a lower-case name wins over its upper-case twin."""
    found: dict[str, str] = {}
    for lower in (False, True):
        for name, value in env.items():
            if value.strip() and name.lower().endswith("_proxy") and (name == name.lower()) == lower:
                found[name[:-6].lower()] = value.strip()
    return found


def _bypass(parts: urllib.parse.SplitResult, no_proxy: str) -> bool:
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return bool(no_proxy) and urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
        host + port, {"no": no_proxy}
    )
