"""locust-llm: find the capacity envelope of OpenAI-compatible LLM endpoints with Locust.

Importing this package does not import Locust (and so does not monkey-patch with gevent): the Locust-facing names
below are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ChatStreamUser",
    "ConfigError",
    "Histogram",
    "OpenAISdkUser",
    "RequestResult",
    "RunConfig",
    "SSEDecoder",
    "StepPlan",
    "StepShape",
    "__version__",
    "install",
    "llm_run",
    "parse_chunk",
]

__version__ = "0.1.0"

_LAZY = {
    "ChatStreamUser": "locust_llm.users.chat",
    "ConfigError": "locust_llm.parsers",
    "Histogram": "locust_llm.histogram",
    "OpenAISdkUser": "locust_llm.users.sdk",
    "RequestResult": "locust_llm.metrics",
    "RunConfig": "locust_llm.config",
    "SSEDecoder": "locust_llm.sse",
    "StepPlan": "locust_llm.shapes.plan",
    "StepShape": "locust_llm.shapes.step_shape",
    "install": "locust_llm.plugin",
    "llm_run": "locust_llm.run",
    "parse_chunk": "locust_llm.sse",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'locust_llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
