"""Reports: reading runs back, the capacity analysis, ``summary.json``, ``report.html``, gates and trends. Pure.

``load_steps`` and ``load_summary`` (:mod:`locust_llm.reports.notebook`) import pandas on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["load_steps", "load_summary"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("locust_llm.reports.notebook"), name)
    raise AttributeError(f"module 'locust_llm.reports' has no attribute {name!r}")
