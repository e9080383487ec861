"""The import contracts mean something: each catches a wrong import added to a copy of the code.

The packages and ``pyproject.toml`` are copied to a temporary directory; ``lint-imports`` (run
there, the copy first on ``PYTHONPATH``) keeps every contract on the unmodified copy, and for
each wrong import below, added alone, the contract it breaks fails (``--contract <id>``: the
failure is attributed to that rule, not to any other).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ["driftline", "collector", "alerts", "drift", "judges", "serving", "dashboard"]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: (file of the copy, the line appended to it, id of the contract that must break)
WRONG_IMPORTS: list[tuple[str, str, str]] = [
    # the collector's own layers
    ("collector/store/queries.py", "import collector.ingest.writer", "collector-layers"),
    ("collector/ingest/decode.py", "import collector.spool.log", "collector-layers"),
    ("collector/errors.py", "import collector.settings", "collector-layers"),
    ("collector/lake/seal.py", "import collector.background", "collector-layers"),
    ("collector/auth.py", "import collector.engines.scrape", "collector-layers"),
    # a new top-level module must be placed in a layer (the contract is exhaustive)
    ("collector/newthing.py", "import collector.errors", "collector-layers"),
    # the package layers: the collector under everything, siblings apart
    ("collector/ingest/writer.py", "import driftline.receive.sink", "layers"),
    ("dashboard/app.py", "import driftline.app", "layers"),
    ("judges/jobs.py", "import drift.runs", "layers"),
    ("collector/timeparse.py", "import serving.settings", "no-serving"),
    ("drift/twosample.py", "import drift.canary.policy", "canary-apart"),
    ("drift/simulate.py", "from drift.canary import evidence", "canary-apart"),
    ("serving/settings.py", "import collector.settings", "serving-http-only"),
    ("migrations/env.py", "import collector.store.models", "migrations-standalone"),
]


def _lint(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")]
    for c in contracts:
        argv += ["--contract", c]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("contracts")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in [*PACKAGES, "migrations"]:
        shutil.copytree(REPO / pkg, root / pkg, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    yield root


def test_the_unmodified_copy_keeps_every_contract(copy: Path) -> None:
    out = _lint(copy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(("path", "line", "contract"), WRONG_IMPORTS)
def test_a_wrong_import_breaks_its_contract(
    copy: Path, path: str, line: str, contract: str
) -> None:
    target = copy / path
    original = target.read_text() if target.exists() else None
    target.write_text((original or '"""A module no layer names."""\n') + f"\n{line}\n")
    try:
        out = _lint(copy, contract)
    finally:
        if original is None:
            target.unlink()
        else:
            target.write_text(original)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 broken" in out.stdout, out.stdout
