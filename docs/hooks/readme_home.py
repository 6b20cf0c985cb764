"""MkDocs hook: the README is the site's home page.

The README lives at the repository's root, where GitHub and PyPI show it, and links into ``docs/``; the site's pages
live in ``docs/``. So the hook adds the README as ``index.md`` and drops the ``docs/`` prefix from its links, which
makes them the site's own relative links (checked by ``mkdocs build --strict`` like every other link).
"""

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[2] / "README.md"
LINK = re.compile(r"\]\(docs/")


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", content=LINK.sub("](", README.read_text(encoding="utf-8"))))
    return files
