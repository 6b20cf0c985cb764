"""The layers of the package, read from its folders: which way imports go, and what the pure core may reach.

A module's layer is its folder (docs/architecture.md, "Packages"): entry points at the top level, Locust adapters in
``runtime/`` and ``users/``, the HTTP client in ``http/``, the simulator in ``sim/``, and the pure core in ``config/``,
``protocol/``, ``measure/``, ``reports/``, ``shapes/`` and ``workload/``. Every import counts, at any depth of a
module, ``TYPE_CHECKING`` blocks included.
"""

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "locust_llm"

PURE = ("config", "protocol", "measure", "reports", "shapes", "workload")
RUNTIME_LIBRARIES = {"locust", "gevent", "greenlet", "geventhttpclient", "aiohttp", "psutil", "openai", "uvloop"}
# What each package may import of ours, besides itself; a package missing here may import nothing of ours.
ALLOWED = {
    "protocol": set(),
    "measure": {"protocol"},
    "workload": {"protocol"},
    "reports": {"measure", "protocol"},
    "shapes": {"measure", "protocol"},
    "config": {"protocol", "measure", "workload", "reports", "shapes"},
    "sim": set(PURE),
    "http": set(PURE),
    "runtime": {"http", *PURE},
    "users": {"runtime", "http", *PURE},
    "(entry)": {"runtime", "users", "http", "sim", *PURE},
}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def layer(module: str) -> str:
    """``(root)`` for the package itself, ``(entry)`` for a top-level module, else its first folder."""
    parts = module.split(".")
    if len(parts) == 1:
        return "(root)"
    if len(parts) == 2 and (PACKAGE / f"{parts[1]}.py").exists():
        return "(entry)"
    return parts[1]


@cache
def imports(module: str) -> frozenset[str]:
    """Every module of ours and every outside top-level package ``module`` imports, anywhere in it."""
    known = modules()
    names = set()
    for node in ast.walk(ast.parse(known[module].read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{module}: relative import"
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    ours = {name for name in names if name in known}
    outside = {name.split(".")[0] for name in names if not name.startswith("locust_llm")}
    return frozenset(ours | outside) - {module, "locust_llm"}


def reached(module: str) -> set[str]:
    """Everything ``module`` imports, directly or through modules of ours."""
    seen, todo = set(), [module]
    while todo:
        for name in imports(todo.pop()):
            if name not in seen:
                seen.add(name)
                if name.startswith("locust_llm."):
                    todo.append(name)
    return seen


def test_the_layers_are_read_from_the_folders():
    layers = {layer(name) for name in modules()}
    assert layers == {"(root)", *ALLOWED}, layers
    assert {name for name in modules() if layer(name) == "(entry)"} == {"locust_llm.cli", "locust_llm.plugin"}


def test_the_package_itself_imports_nothing_of_ours_at_import_time():
    """``locust_llm/__init__.py`` resolves its names lazily: importing it never imports Locust."""
    assert not {name for name in imports("locust_llm") if name.startswith("locust_llm")}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_the_layers_below_it(package):
    offenders = [
        f"{name} imports {other}"
        for name in modules()
        if layer(name) == package
        for other in imports(name)
        if other.startswith("locust_llm.") and layer(other) not in ALLOWED[package] | {package}
    ]
    assert not offenders, offenders


@pytest.mark.parametrize("package", PURE)
def test_the_pure_core_reaches_no_runtime_library_directly_or_through_another_module(package):
    offenders = {
        f"{name} reaches {', '.join(sorted(reached(name) & RUNTIME_LIBRARIES))}"
        for name in modules()
        if layer(name) == package and reached(name) & RUNTIME_LIBRARIES
    }
    assert not offenders, offenders


def test_the_simulator_reaches_no_adapter_of_the_generator():
    offenders = {
        f"{name} reaches {other}"
        for name in modules()
        if layer(name) == "sim"
        for other in reached(name)
        if other.startswith("locust_llm.") and layer(other) in {"runtime", "users", "http", "(entry)"}
    }
    assert not offenders, offenders
    generator = {"locust", "gevent", "geventhttpclient"}
    assert not any(reached(name) & generator for name in modules() if layer(name) == "sim")


def test_no_module_imports_itself_back():
    """No import cycle between modules: no module reaches itself."""
    cycles = sorted(name for name in modules() if name in reached(name))
    assert not cycles, cycles


def test_no_package_imports_itself_back():
    edges = {
        (layer(name), layer(other))
        for name in modules()
        for other in imports(name)
        if other.startswith("locust_llm.") and layer(other) != layer(name)
    }
    for start in {a for a, _ in edges}:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            for b in {b for a, b in edges if a == here} - seen:
                seen.add(b)
                todo.append(b)
        assert start not in seen, f"packages import each other in a cycle through {start}: {sorted(edges)}"


def test_a_module_name_is_not_reused_across_packages():
    """Two modules of one name in two packages would be two ideas under one name (the ``__init__``s aside)."""
    by_name: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.stem, []).append(name)
    assert {stem: names for stem, names in by_name.items() if len(names) > 1} == {}


def test_no_module_needs_a_reason_for_its_size():
    """Modules of 150-500 lines are normal; one over 500 lines says why in its docstring."""
    for name, path in modules().items():
        lines = path.read_text().splitlines()
        if len(lines) > 500:
            docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert "over 500 lines" in docstring, f"{name}: {len(lines)} lines and no reason for it"


# A date of the project's life (a paper's year is not one), a numbered round of past work, and a file of the
# repository: a path with a folder, or any name of a Python or Markdown file (output files such as summary.json are
# not the repository's).
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b20(?:2[4-9]|[3-9]\d)\b")
ROUND = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))\s+"
    r"(?:session|round|wave)s?\b|\b(?:wave|round|session)[- ]?\d+\b",
    re.IGNORECASE,
)
FILE = re.compile(r"(?<![\w/.{}-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z]\w*|[\w-]+\.(?:py|md))(?![\w{}])")


def _module_docstrings():
    for name, path in sorted(modules().items()):
        yield name, ast.get_docstring(ast.parse(path.read_text())) or ""


def _bench_docstrings():
    """The benches and their tests: held to the same rules as the package, but the word budget."""
    for path in sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "bench" / "tests").glob("*.py")]):
        yield str(path.relative_to(ROOT)), path, ast.get_docstring(ast.parse(path.read_text())) or ""


def test_module_docstrings_cite_no_date_and_no_numbered_round_of_past_work():
    texts = [*_module_docstrings(), *((name, text) for name, _, text in _bench_docstrings())]
    found = {
        name: DATE.findall(text) + ROUND.findall(text)
        for name, text in texts
        if DATE.search(text) or ROUND.search(text)
    }
    assert not found, found


def test_module_docstrings_cite_only_files_the_repository_has():
    missing = {}
    for name, text in _module_docstrings():
        for cited in FILE.findall(text):
            if not any((base / cited).exists() for base in (ROOT, PACKAGE, PACKAGE.joinpath(*name.split(".")[1:-1]))):
                missing.setdefault(name, []).append(cited)
    for name, path, text in _bench_docstrings():
        for cited in FILE.findall(text):
            if not any((base / cited).exists() for base in (ROOT, PACKAGE, path.parent)):
                missing.setdefault(name, []).append(cited)
    assert not missing, missing


def test_bench_docstrings_are_short():
    for name, _, text in _bench_docstrings():
        assert text and len(text.splitlines()) <= 15, f"{name}: {len(text.splitlines())} lines"


def test_the_dating_rule_would_catch_a_lab_notebook():
    """The rules above fail on the kind of docstring they exist to keep out."""
    notebook = "Measured on 2026-12-03 in the ninth session, as in wave 1 (bench/pair.py; see DESIGN.md, 2025)."
    assert DATE.findall(notebook) == ["2026-12-03", "2025"]
    assert ROUND.findall(notebook) == ["ninth session", "wave 1"]
    assert FILE.findall(notebook) == ["bench/pair.py", "DESIGN.md"]
    assert not DATE.search("Kneedle (Satopaa et al., 2011)") and not ROUND.search("the first attempt of a request")
    assert FILE.findall("``{prefix}_llm_steps.csv``, ``summary.json``") == []


def test_module_docstrings_are_short_and_together_under_7000_words():
    """About 60 words a module: a verdict's module states its rule with its formula (the knee, the evidence of
    capacity, the diagnosis, the search), the others say what they do in a few lines; not a lab notebook."""
    words = 0
    for name, text in _module_docstrings():
        assert len(text.splitlines()) <= 15, f"{name}: {len(text.splitlines())} lines"
        words += len(text.split())
    assert words < 7000, words
