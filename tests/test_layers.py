"""The code's layering is a test: the import contracts in pyproject.toml hold.

`lint-imports` (import-linter) reads the imports of agents/ and taskos/ without running
them and checks every contract: the engine imports no Django and nothing of the web app,
the web app uses the engine's public API only, the engine's core never imports the
simulated model, each engine package imports only those below it, and no import cycle
exists anywhere (imports inside functions and under TYPE_CHECKING count too).
"""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "agents"


def test_the_import_contracts_hold():
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_engine_keeps_few_modules_beside_its_packages():
    top = sorted(p.name for p in AGENTS.glob("*.py"))
    assert len(top) <= 15, top


def test_no_class_of_the_loop_is_built_from_mixins():
    # The loop's collaborators get what they use; none is mixed into another class.
    for path in (AGENTS / "loop").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                assert len(node.bases) <= 1, (path.name, node.name,
                                              [ast.unparse(b) for b in node.bases])


def test_the_apps_are_installed_in_their_layering_order():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in contracts["contracts"]
                  if c["type"] == "layers" and c["layers"][-1].startswith("taskos."))
    bottom_up = [name.strip() for layer in reversed(layers)
                 for name in layer.replace(":", "|").split("|")]
    apps = [app for app in settings.INSTALLED_APPS if app.startswith("taskos.")]
    assert sorted(apps, key=bottom_up.index) == apps, (apps, bottom_up)
