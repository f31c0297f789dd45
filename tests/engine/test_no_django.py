"""The engine must stay free of Django (DESIGN boundaries)."""
import re
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[2] / "agents"


def test_agents_never_import_django():
    offenders = [str(p) for p in AGENTS.rglob("*.py")
                 if re.search(r"^\s*(from|import)\s+django", p.read_text(), re.M)]
    assert offenders == []


def test_openai_and_tiktoken_are_imported_in_one_module_each():
    for package, home in (("openai", "model.py"), ("tiktoken", "tokens.py")):
        users = sorted(p.name for p in AGENTS.rglob("*.py")
                       if re.search(rf"^\s*(from|import)\s+{package}\b", p.read_text(), re.M))
        assert users == [home], (package, users)
