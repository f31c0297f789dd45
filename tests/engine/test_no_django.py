"""The engine must stay free of Django (docs/design.md, boundaries)."""
import re
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[2] / "agents"


def test_agents_never_import_django():
    offenders = [str(p) for p in AGENTS.rglob("*.py")
                 if re.search(r"^\s*(from|import)\s+django", p.read_text(), re.M)]
    assert offenders == []


def test_openai_and_tiktoken_are_imported_in_one_module_each():
    # The simulated provider counts with its own tiktoken code (agents/sim/counting.py) on
    # purpose: a provider that used the engine's counter would agree with it by construction.
    for package, homes in (("openai", ["provider/client.py"]),
                           ("tiktoken", ["counting/tokens.py", "sim/counting.py"])):
        users = sorted(str(p.relative_to(AGENTS)) for p in AGENTS.rglob("*.py")
                       if re.search(rf"^\s*(from|import)\s+{package}\b", p.read_text(), re.M))
        assert users == homes, (package, users)


def test_the_simulated_provider_imports_nothing_from_the_engine():
    # Only its own modules, the scenario scripts it plays and the agreed strings
    # (agents/protocol.py); no counter, extractor or summary.
    allowed = re.compile(r"agents\.(sim|scenarios|protocol)\b")
    for path in (AGENTS / "sim").rglob("*.py"):
        for match in re.finditer(r"^\s*(?:from|import)\s+(agents[\w.]*)", path.read_text(), re.M):
            assert allowed.match(match.group(1)), (path.name, match.group(1))
