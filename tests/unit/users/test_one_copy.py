"""The two user classes share their attempt logic (http/attempt.py) instead of each carrying a copy."""

import keyword
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "locust_llm"
STREAM, SDK = PACKAGE / "http" / "stream.py", PACKAGE / "users" / "sdk.py"
WINDOW = 6


def shapes(path):
    """The file's code lines, each reduced to its shape: names, strings and numbers replaced by placeholders."""
    out = []
    for line in path.read_text().splitlines():
        code = line.split("#", 1)[0].strip()
        if not code or code.startswith(('"""', "'''", "import ", "from ")):
            continue
        code = re.sub(r"(\"[^\"]*\"|'[^']*')", "S", code)
        code = re.sub(r"\b\d+(\.\d+)?\b", "N", code)
        code = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: m.group() if keyword.iskeyword(m.group()) else "x", code)
        code = re.sub(r"x(\.x)+", "x", code)
        out.append(code)
    return out


def runs(lines):
    return {tuple(lines[i : i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


def shared_runs(a, b):
    shared = runs(shapes(a)) & runs(shapes(b))
    # runs made of names and brackets alone (closing a call, a signature) say nothing
    return {r for r in shared if sum(bool(re.sub(r"[x(),:\[\]=. ]", "", line)) for line in r) >= 3}


def test_no_run_of_six_alike_lines_is_in_both_users():
    assert not shared_runs(STREAM, SDK)


def test_the_check_finds_a_block_copied_with_other_names(tmp_path):
    block = STREAM.read_text().split("def _read_events", 1)[1].split("def _on_event", 1)[0]
    renamed = block.replace("result", "outcome").replace("decoder", "parser")
    (tmp_path / "a.py").write_text("def _read_events" + block)
    (tmp_path / "b.py").write_text("x = 1\ndef read" + renamed)
    assert shared_runs(tmp_path / "a.py", tmp_path / "b.py")
