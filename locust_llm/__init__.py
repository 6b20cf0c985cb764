"""locust-llm: find the capacity envelope of OpenAI-compatible LLM endpoints with Locust.

Importing this package does not import Locust (which monkey-patches the process with gevent): the Locust-facing
names below are loaded on first use.
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
    "ConfigError": "locust_llm.config.parsers",
    "Histogram": "locust_llm.measure.histogram",
    "OpenAISdkUser": "locust_llm.users.sdk",
    "RequestResult": "locust_llm.protocol.metrics",
    "RunConfig": "locust_llm.config.run_config",
    "SSEDecoder": "locust_llm.protocol.sse",
    "StepPlan": "locust_llm.shapes.plan",
    "StepShape": "locust_llm.runtime.step_shape",
    "install": "locust_llm.plugin",
    "llm_run": "locust_llm.runtime.run",
    "parse_chunk": "locust_llm.protocol.sse",
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
