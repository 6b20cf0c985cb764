"""``--routes FILE``: several endpoints, each with its own base URL, model, key, prices and trust. Pure.

A key is never written in the file, only the name of the variable that holds it (``api_key_env``, or a header
``env:NAME``), read in each process from its own environment, and sent only to its own route. A bad file is one
:class:`~locust_llm.config.parsers.ConfigError` line naming the route and the field. docs/endpoints.md, "Routes".
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from locust_llm.config.parsers import ConfigError
from locust_llm.config.redact import is_secret_header
from locust_llm.config.tls import TlsSettings, tls_from
from locust_llm.measure.sla import Prices
from locust_llm.protocol.apis import API_NAMES
from locust_llm.protocol.retry import POLICIES

__all__ = ["FALLBACK_CAUSES", "Route", "RoutePolicy", "Routes", "load_routes"]

FALLBACK_CAUSES = ("timeout", "connect_error")
"""What ``fallback_on`` may name besides HTTP statuses: a request that timed out, a connection that failed."""

_ROUTE_KEYS = frozenset(
    {"name", "base_url", "model", "api", "api_key_env", "headers", "extra_body", "weight", "max_tokens", "prices"}
    | {"ca_bundle", "insecure"}
)
_POLICY_KEYS = frozenset({"primary", "fallback", "fallback_on", "hedge_ttft_ms", "hedge_to", "retry_policy"})
_PRICE_KEYS = {"input": "input_usd_per_mtok", "output": "output_usd_per_mtok", "cached": "cached_input_usd_per_mtok"}
_KEYISH = re.compile(r"(?i)^(api_?key|key|token|secret|password|authorization|bearer)$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Route:
    """One endpoint: where requests go, what model they name, and what proves who we are there."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None
    api_key: str | None = field(repr=False)
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    header_names: tuple[str, ...]
    env_headers: tuple[str, ...]  # the headers whose values came from the environment (``env:NAME``)
    extra_body: Mapping[str, Any] | None
    weight: float
    max_tokens: int | None
    prices: Prices | None
    tls: TlsSettings
    api: str | None = None  # None: --api

    def credentials(self) -> tuple[str, ...]:
        """The key, and the values of secret headers and of headers read from the environment (``env:NAME``): what
        must never be printed, nor sent to another host."""
        values = [self.api_key] if self.api_key else []
        secret = [v for n, v in self.headers if v and (is_secret_header(n) or n in self.env_headers)]
        return tuple(values + secret)

    def describe(self) -> dict[str, Any]:
        """For reports: everything but the credentials (the key's variable name, the header names)."""
        return {
            "name": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "headers": list(self.header_names),
            "weight": self.weight,
            "max_tokens": self.max_tokens,
            "prices": None if self.prices is None else self.prices.as_dict(),
            "tls": self.tls.describe(),
            "api": self.api,
        }


@dataclass(frozen=True)
class RoutePolicy:
    primary: tuple[tuple[str, float], ...]  # routes drawn per client request, with their weights
    fallback: tuple[str, ...]
    fallback_on: frozenset[int] | None  # None: --fallback-on
    fallback_causes: frozenset[str]
    hedge_ttft_ms: float | None
    hedge_to: str | None
    retry_policy: str | None  # None: --retry-policy


@dataclass(frozen=True)
class Routes:
    path: str
    routes: tuple[Route, ...]
    policy: RoutePolicy

    def __getitem__(self, name: str) -> Route:
        return next(r for r in self.routes if r.name == name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.routes)

    def credentials(self) -> tuple[str, ...]:
        return tuple(c for r in self.routes for c in r.credentials())

    def without(self, names: set[str]) -> Routes:
        """These routes less ``names`` (dropped by ``--routes-allow-down``), the policy following."""
        left = tuple(r for r in self.routes if r.name not in names)
        p = self.policy
        primary = tuple((n, w) for n, w in p.primary if n not in names) or ((left[0].name, 1.0),)
        policy = RoutePolicy(
            primary,
            tuple(n for n in p.fallback if n not in names),
            p.fallback_on,
            p.fallback_causes,
            p.hedge_ttft_ms,
            None if p.hedge_to in names else p.hedge_to,
            p.retry_policy,
        )
        return Routes(self.path, left, policy)

    def describe(self) -> dict[str, Any]:
        p = self.policy
        return {
            "file": self.path,
            "routes": [r.describe() for r in self.routes],
            "primary": {n: w for n, w in p.primary},
            "fallback": list(p.fallback),
            "hedge_to": p.hedge_to,
        }


def _fail(path: str, where: str, field_name: str, problem: str) -> ConfigError:
    return ConfigError(f"--routes {path}: {where} field '{field_name}': {problem}")


def load_routes(path: str, environ: Mapping[str, str] | None = None) -> Routes:
    """Read and check a routes file (module docstring); keys from ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"--routes must name a readable TOML file, got {path!r} ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--routes {path}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - {"route", "policy"})
    if unknown:
        raise ConfigError(f"--routes {path}: unknown table '{unknown[0]}' (allowed: [[route]] and [policy])")
    tables = data.get("route")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"--routes {path}: no [[route]] table; give at least one route")
    routes: list[Route] = []
    for number, table in enumerate(tables, start=1):
        route = _route(path, number, table, environ)
        if any(r.name == route.name for r in routes):
            raise _fail(path, f"route #{number}", "name", f"'{route.name}' is used by another route")
        routes.append(route)
    policy_table = data.get("policy", {})
    if not isinstance(policy_table, dict):
        raise ConfigError(f"--routes {path}: [policy] must be a table")
    return Routes(path, tuple(routes), _policy(path, policy_table, routes))


def _text(path: str, where: str, table: Mapping[str, Any], key: str, required: bool = True) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        got = "nothing" if value is None else repr(value)
        raise _fail(path, where, key, f"must be a non-empty string, got {got}")
    return value.strip()


def _secret(path: str, where: str, key: str, name: str, environ: Mapping[str, str]) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise _fail(path, where, key, f"must name an environment variable, got {name!r}")
    value = environ.get(name, "").strip()
    if not value:
        raise _fail(path, where, key, f"the environment variable {name} is not set (export it in every process)")
    return value


def _route(path: str, number: int, table: Any, environ: Mapping[str, str]) -> Route:
    if not isinstance(table, dict):
        raise ConfigError(f"--routes {path}: route #{number} must be a table")
    where = f"route #{number}"
    name = _text(path, where, table, "name")
    assert name is not None
    if not _NAME.fullmatch(name):
        raise _fail(path, where, "name", f"must be letters, digits, '.', '_' or '-' (up to 64), got {name!r}")
    where = f"route '{name}'"
    for key in table:
        if _KEYISH.match(key):
            problem = "keys are never written in the routes file: export the key and name it with api_key_env"
            raise _fail(path, where, key, problem)
        if key not in _ROUTE_KEYS:
            raise _fail(path, where, key, f"unknown field (allowed: {', '.join(sorted(_ROUTE_KEYS))})")
    base_url = _text(path, where, table, "base_url")
    assert base_url is not None
    if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", base_url):
        raise _fail(path, where, "base_url", f"must be an http:// or https:// URL, got {base_url!r}")
    model = _text(path, where, table, "model")
    key_env = _text(path, where, table, "api_key_env", required=False)
    api_key = None if key_env is None else _secret(path, where, "api_key_env", key_env, environ)
    headers, names, from_env = _headers(path, where, table.get("headers", {}), environ)
    extra = table.get("extra_body")
    if extra is not None and not isinstance(extra, dict):
        raise _fail(path, where, "extra_body", f"must be a table, got {type(extra).__name__}")
    weight = table.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise _fail(path, where, "weight", f"must be a number above 0, got {weight!r}")
    max_tokens = table.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise _fail(path, where, "max_tokens", f"must be a whole number of at least 1, got {max_tokens!r}")
    insecure = table.get("insecure", False)
    if not isinstance(insecure, bool):
        raise _fail(path, where, "insecure", f"must be true or false, got {insecure!r}")
    try:
        tls = tls_from(_text(path, where, table, "ca_bundle", required=False), insecure, environ)
    except ConfigError as exc:
        raise _fail(path, where, "ca_bundle", str(exc)) from None
    assert model is not None
    prices = _prices(path, where, table.get("prices"))
    api = table.get("api")
    if api is not None and api not in API_NAMES:
        raise _fail(path, where, "api", f"must be one of {', '.join(API_NAMES)}, got {api!r}")
    return Route(
        name,
        base_url.rstrip("/"),
        model,
        key_env,
        api_key,
        headers,
        names,
        from_env,
        extra,
        float(weight),
        max_tokens,
        prices,
        tls,
        api,
    )


def _headers(
    path: str, where: str, table: Any, environ: Mapping[str, str]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[str, ...]]:
    if not isinstance(table, dict):
        raise _fail(path, where, "headers", f"must be a table of name = value, got {type(table).__name__}")
    out, from_env = [], []
    for name, value in table.items():
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name) or not isinstance(value, str):
            raise _fail(path, where, f"headers.{name}", "must be a header name with a string value")
        if value.startswith("env:"):
            value = _secret(path, where, f"headers.{name}", value[4:], environ)
            from_env.append(name)
        elif is_secret_header(name):
            problem = "a secret header's value is never written in the routes file: write env:NAME, export NAME"
            raise _fail(path, where, f"headers.{name}", problem)
        out.append((name, value))
    return tuple(out), tuple(table), tuple(from_env)


def _prices(path: str, where: str, table: Any) -> Prices | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise _fail(path, where, "prices", "must be a table of input, output and cached (USD per 1M tokens)")
    values: dict[str, float] = {}
    for key, value in table.items():
        if key not in _PRICE_KEYS:
            raise _fail(path, where, f"prices.{key}", "unknown price (allowed: input, output, cached)")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise _fail(path, where, f"prices.{key}", f"must be a number of at least 0, got {value!r}")
        values[_PRICE_KEYS[key]] = float(value)
    return Prices(**values)


def _known(path: str, field_name: str, name: Any, routes: list[Route]) -> str:
    if not isinstance(name, str) or name not in {r.name for r in routes}:
        known = ", ".join(r.name for r in routes)
        raise _fail(path, "[policy]", field_name, f"names no route: got {name!r} (routes: {known})")
    return name


def _policy(path: str, table: Mapping[str, Any], routes: list[Route]) -> RoutePolicy:
    for key in table:
        if key not in _POLICY_KEYS:
            raise _fail(path, "[policy]", key, f"unknown field (allowed: {', '.join(sorted(_POLICY_KEYS))})")
    weight = {r.name: r.weight for r in routes}
    raw = table.get("primary", routes[0].name)
    primary: tuple[tuple[str, float], ...]
    if isinstance(raw, str):
        primary = ((_known(path, "primary", raw, routes), 1.0),)
    elif isinstance(raw, list) and raw:
        primary = tuple((_known(path, "primary", n, routes), weight[n]) for n in raw)
    elif isinstance(raw, dict) and raw:
        for n, w in raw.items():
            _known(path, "primary", n, routes)
            if isinstance(w, bool) or not isinstance(w, int | float) or w <= 0:
                raise _fail(path, "[policy]", f"primary.{n}", f"a weight must be a number above 0, got {w!r}")
        primary = tuple((n, float(w)) for n, w in raw.items())
    else:
        raise _fail(
            path, "[policy]", "primary", f"must be a route, a list of routes or a table of weights, got {raw!r}"
        )
    fallback = table.get("fallback", [])
    if not isinstance(fallback, list):
        raise _fail(path, "[policy]", "fallback", f"must be a list of routes, got {fallback!r}")
    fallback = [_known(path, "fallback", n, routes) for n in fallback]
    statuses, causes = _fallback_on(path, table.get("fallback_on"))
    hedge = table.get("hedge_ttft_ms")
    if hedge is not None and (isinstance(hedge, bool) or not isinstance(hedge, int | float) or hedge <= 0):
        raise _fail(path, "[policy]", "hedge_ttft_ms", f"must be a number of ms above 0, got {hedge!r}")
    hedge_to = table.get("hedge_to")
    if hedge_to is not None:
        hedge_to = _known(path, "hedge_to", hedge_to, routes)
        if hedge is None:
            raise _fail(path, "[policy]", "hedge_to", "needs hedge_ttft_ms (when to hedge)")
    retry = table.get("retry_policy")
    if retry is not None and retry not in POLICIES:
        raise _fail(path, "[policy]", "retry_policy", f"must be one of {', '.join(POLICIES)}, got {retry!r}")
    return RoutePolicy(
        primary, tuple(fallback), statuses, causes, None if hedge is None else float(hedge), hedge_to, retry
    )


def _fallback_on(path: str, raw: Any) -> tuple[frozenset[int] | None, frozenset[str]]:
    if raw is None:
        return None, frozenset()
    if not isinstance(raw, list):
        raise _fail(path, "[policy]", "fallback_on", f'must be a list such as [429, 503, "timeout"], got {raw!r}')
    statuses, causes = set(), set()
    for item in raw:
        if isinstance(item, int) and not isinstance(item, bool) and 100 <= item <= 599:
            statuses.add(item)
        elif item in FALLBACK_CAUSES:
            causes.add(item)
        else:
            allowed = f"HTTP statuses or {', '.join(map(repr, FALLBACK_CAUSES))}"
            raise _fail(path, "[policy]", "fallback_on", f"each entry must be {allowed}, got {item!r}")
    return frozenset(statuses), frozenset(causes)
