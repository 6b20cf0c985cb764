"""Keep secrets out of everything a person or a file sees: keys, secret headers, bearer tokens. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["is_secret_header", "redact"]

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",}]+")
_SECRET_HEADER = re.compile(r"(?i)key|token|auth|secret|cookie|password")


def is_secret_header(name: str) -> bool:
    """Header names whose values are secrets: anything like a key, token, auth, secret, cookie or password."""
    return bool(_SECRET_HEADER.search(name))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace every occurrence of each secret, and any ``Bearer <token>``, with ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _BEARER.sub(r"\1***", text)
