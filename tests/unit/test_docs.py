"""The documentation holds: the site builds strictly, the flag reference is the flag table's, every reference to a page
or section resolves, each flag's help is one line, and the README stays a newcomer's ten minutes, not a diary."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from locust_llm.cli import format_flags_markdown
from locust_llm.config.flags import FLAGS
from locust_llm.sim.command import SIM_FLAGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
README_LIMIT = 30_000
HELP_LIMIT = 150
"""A flag's help is one line of ``locust-llm flags`` and of a terminal's ``--help``; details go to the docs."""


def headings(path: Path) -> list[str]:
    """A page's headings as text (backticks dropped), outside code blocks."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.append(m.group(1).replace("`", "").strip())
    return found


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.lower()).strip()
    return re.sub(r"[-\s]+", "-", text)


def test_the_site_builds_with_every_link_and_anchor_resolved(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Quick start" in home and 'href="methodology/"' in home  # the README, its links made the site's own


def test_the_flag_reference_is_what_the_flag_table_prints():
    committed = (DOCS / "flags.md").read_text(encoding="utf-8")
    assert committed == format_flags_markdown() + "\n", (
        "docs/flags.md differs from the flag table: run `locust-llm flags --format markdown > docs/flags.md`"
    )
    for flag in (*FLAGS, *SIM_FLAGS):
        assert f"| `{flag.name}` |" in committed


@pytest.mark.parametrize("flag", [*FLAGS, *SIM_FLAGS], ids=lambda f: f.name)
def test_each_flag_has_a_one_line_help(flag):
    assert "\n" not in flag.help and 0 < len(flag.help) <= HELP_LIMIT, (flag.name, len(flag.help))


REFERENCE = re.compile(r"(docs/[\w-]+\.md|README(?:\.md)?)(?:#([\w-]+)|, \"([^\"]+)\")?")
"""``docs/page.md``, ``docs/page.md#anchor`` or ``docs/page.md, "Heading"`` (and the same of ``README``), as code,
comments and messages cite the docs."""

LINK = re.compile(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)")
"""A link from one docs page to another, ``[text](page.md#anchor)``: it must resolve where the page is read (in the
repository as on the site), so not to the site's generated ``index.md``."""

REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:locust_llm|tests|bench|k8s|docs|examples|baselines|\.github|\.ci)/(?:[\w.-]+/)*[\w-]+\.\w+)\b"
)
"""A file of the repository named by its path from the root (``bench/search:`` in a message is no file)."""


def sources() -> list[Path]:
    """Everything that may cite the docs or a file: code, tests, benches, pages, README, manifests and workflows."""
    found = [*ROOT.glob("locust_llm/**/*.py"), *ROOT.glob("bench/**/*.py"), *ROOT.glob("tests/**/*.py")]
    found += [*PAGES, ROOT / "README.md", *ROOT.glob("k8s/**/*.yaml"), *ROOT.glob(".github/workflows/*.yml")]
    return [path for path in found if path != Path(__file__).resolve()]


def references() -> list[tuple[str, str, str | None, str | None]]:
    found = []
    for path in sources():
        text = path.read_text(encoding="utf-8")
        for m in REFERENCE.finditer(text):
            title = m.group(3) and re.sub(r"\s*\n\s*(#\s*)?", " ", m.group(3))  # a title wrapped in code or a comment
            target = "README.md" if m.group(1).startswith("README") else m.group(1)
            found.append((str(path.relative_to(ROOT)), target, m.group(2), title))
        if path.parent == DOCS:
            source = str(path.relative_to(ROOT))
            found += [(source, f"docs/{m.group(1)}", m.group(2), None) for m in LINK.finditer(text)]
    return found


def test_every_reference_to_a_page_or_section_resolves():
    refs = references()
    assert len(refs) > 20  # the code cites the docs: this test reads something
    broken = []
    for source, page, anchor, title in refs:
        path = ROOT / page
        if not path.is_file():
            broken.append(f"{source}: {page} does not exist")
            continue
        titles = headings(path)
        if anchor and anchor not in {slug(t) for t in titles}:
            broken.append(f"{source}: {page}#{anchor}: no such heading")
        if title and not any(re.match(re.escape(title) + r"\b", t) for t in titles):  # the heading, or its start
            broken.append(f'{source}: {page}, "{title}": no such heading')
    assert not broken, "\n".join(broken)


def test_every_file_of_the_repository_named_exists():
    """A path from the repository's root (a module, a test, a manifest, a page) names a file or folder it has;
    ``{...}`` and ``*`` stand for names made at run time, and ``.ci/bin/`` is made by CI."""
    missing = []
    for path in sources():
        for cited in REPO_PATH.findall(path.read_text(encoding="utf-8")):
            if "{" in cited or "*" in cited or cited.startswith(".ci/bin") or (ROOT / cited).exists():
                continue
            missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert not missing, "\n".join(missing)


def test_the_reference_rules_catch_a_stale_pointer():
    """The patterns above read the forms that went stale before: a YAML comment naming a README heading, a link to
    the site's generated page, a test support module naming a test file."""
    assert REFERENCE.search('# the baseline (README, "Nightly capacity tests").').groups()[::2] == (
        "README",
        "Nightly capacity tests",
    )
    assert LINK.search("([Exit codes](index.md#exit-codes))").groups() == ("index.md", "exit-codes")
    assert REPO_PATH.findall("Run by tests/unit/runtime/test_gc_settings.py in its own process") == [
        "tests/unit/runtime/test_gc_settings.py"
    ]


def test_the_readme_is_short_and_points_into_the_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) < README_LIMIT, len(text)
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    assert linked == {p.name for p in PAGES}, {p.name for p in PAGES} ^ linked  # every page reachable from it


SESSIONS = r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|later|this) session\b"
DIARY = [
    (re.compile(SESSIONS, re.I), "a session"),
    (re.compile(r"\bwave \d\b|\bround \d\b", re.I), "a wave or round of work"),
    (re.compile(r"\b20\d\d-\d\d-\d\d\b(?!T)"), "a date"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"), "a commit hash"),
    (re.compile(r"/work/|/home/\w+/"), "a local path"),
]


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_no_page_reads_as_a_diary(path):
    text = path.read_text(encoding="utf-8")
    found = [f"{what}: {m.group(0)!r}" for rx, what in DIARY for m in rx.finditer(text)]
    assert not found, found
