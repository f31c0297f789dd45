"""What the code cites resolves to a file in the repository.

Comments and docstrings cite features by ID ("feature C3", "features C6, T7", or a bare
"C13"), past work by issue ("issue 13", "issue 9 F11") and files by path. Each feature ID
must have its entry in docs/features.md, each issue its section in docs/history.md, and
each path must exist: a reference a newcomer cannot follow is a broken one.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = [p for folder in ("agents", "taskos", "tests", "scripts", "templates", "static")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".html", ".js", ".css", ".sh", ".json") and p.is_file()
        and "vendor" not in p.parts and "migrations" not in p.parts]  # migrations: history
DOCS = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
FEATURE = re.compile(r"(?<![\w#-])([CTWE])([1-9]\d?)(?![\w-])")
ISSUE = re.compile(r"\bissues? (\d+)\b")
PATH = re.compile(r"(?<![\w./-])((?:agents|taskos|docs|tests|scripts|templates|static)"
                  r"/[\w/.-]*\w\.(?:py|md|html|js|css|json|sh|png|toml))\b")


def _texts(paths):
    for path in paths:
        yield path, path.read_text(encoding="utf-8", errors="replace")


def test_every_feature_id_cited_has_its_entry_in_the_feature_list():
    listed = set(re.findall(r"^### ([CTWE]\d{1,2}) ", (ROOT / "docs/features.md").read_text(),
                            re.M))
    missing = {f"{path.relative_to(ROOT)}: {letter}{number}"
               for path, text in _texts(p for p in CODE if p.suffix == ".py")
               for letter, number in FEATURE.findall(text)
               if f"{letter}{number}" not in listed}
    assert not missing, sorted(missing)


def test_the_outside_catalogue_is_not_cited_any_more():
    cited = [f"{path.relative_to(ROOT)}" for path, text in _texts(CODE)
             if re.search(r"\bSPEC\b|\bDESIGN\b", text)]
    assert not cited, cited


def test_every_issue_cited_has_its_section_in_the_history():
    sections = set(re.findall(r"^## Issue (\d+)\b", (ROOT / "docs/history.md").read_text(),
                              re.M))
    missing = {f"{path.relative_to(ROOT)}: issue {number}" for path, text in _texts(CODE + DOCS)
               for number in ISSUE.findall(text) if number not in sections}
    assert not missing, sorted(missing)


def test_every_path_cited_exists():
    missing = {f"{path.relative_to(ROOT)}: {cited}" for path, text in _texts(CODE + DOCS)
               for cited in PATH.findall(text) if not (ROOT / cited).exists()}
    assert not missing, sorted(missing)
