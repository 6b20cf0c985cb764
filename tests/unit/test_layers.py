"""The rooms of the package and which way imports go: entry points -> adapters -> pure core, never back."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "locust_llm"

ENTRY = {"locust_llm.plugin", "locust_llm.cli"}
ADAPTERS = {
    "locust_llm.run",
    "locust_llm.recorder",
    "locust_llm.locust_batch",
    "locust_llm.outputs",
    "locust_llm.preflight",
    "locust_llm.lifecycle",
    "locust_llm.interrupt",
    "locust_llm.webui",
    "locust_llm.users.base",
    "locust_llm.users.attempt",
    "locust_llm.users.chat",
    "locust_llm.users.sdk",
    "locust_llm.users.stream",
    "locust_llm.users.pump",
    "locust_llm.users.wire",
    "locust_llm.users.head",
    "locust_llm.users.flow",
    "locust_llm.users.open_loop",
    "locust_llm.shapes.step_shape",
    "locust_llm.shapes.search_driver",
    "locust_llm.collect.collector",
    "locust_llm.collect.cpu",
    "locust_llm.sim.runtime",
    "locust_llm.sim.alarm",
    "locust_llm.sim.server",
    "locust_llm.sim.launcher",
    "locust_llm.sim.cli",
    "locust_llm.sim.__main__",
}
RUNTIME_LIBRARIES = {"locust", "gevent", "greenlet", "geventhttpclient", "aiohttp", "psutil", "openai", "uvloop"}


def modules():
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_pure_core_imports_no_runtime_library_and_no_adapter():
    offenders = []
    for name, path in modules():
        if name in ENTRY or name in ADAPTERS:
            continue
        for imported in imports(path):
            if imported.split(".")[0] in RUNTIME_LIBRARIES or imported in ADAPTERS | ENTRY:
                offenders.append(f"{name} imports {imported}")
    assert not offenders, offenders


def test_adapters_never_import_an_entry_point():
    offenders = [
        f"{name} imports {imported}"
        for name, path in modules()
        if name in ADAPTERS
        for imported in imports(path)
        if imported in ENTRY
    ]
    assert not offenders, offenders


def test_every_module_is_small():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules()}
    assert max(sizes.values()) <= 400, {n: s for n, s in sizes.items() if s > 400}
