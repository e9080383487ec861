"""CI runs the static checks before the tests and fails on any of them (``.ci/run``, the
Makefile's ``lint`` and ``typecheck`` targets).

The README says CI checks ruff, the import contracts and mypy; ``.ci/run`` once ran ``make
test`` only. The script is run for real with ``make`` replaced on ``PATH`` by a recorder (the
suite must not run the suite); the Makefile's targets are run by the real ``make`` with a
``VENV`` whose tools are recorders, and once with the real ``ruff`` on a file with an error.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CI_RUN = REPO / ".ci" / "run"

#: a stand-in for a command: appends its name and arguments to $RECORD and exits with the code
#: $FAIL gives it ("name:first-argument=code" or "name=code", comma-separated; else 0)
RECORDER = """#!/usr/bin/env bash
name="$(basename "$0")"
echo "$name $*" >> "$RECORD"
IFS=, read -ra rules <<< "$FAIL"
for rule in "${rules[@]}"; do
  if [[ "$rule" == "$name:$1="* || "$rule" == "$name="* ]]; then exit "${rule##*=}"; fi
done
exit 0
"""


def _recorder(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text(RECORDER)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(
    cmd: list[str], tmp_path: Path, fail: str = "", path_first: Path | None = None
) -> tuple[int, list[str], str]:
    record = tmp_path / "record.txt"
    record.write_text("")
    env = {**os.environ, "RECORD": str(record), "FAIL": fail}
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    calls = [line.rstrip() for line in record.read_text().splitlines()]
    return done.returncode, calls, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("fail", "called", "ok"),
    [
        ("", ["make lint", "make typecheck", "make test"], True),
        ("make:lint=2", ["make lint", "make typecheck"], False),
        ("make:typecheck=2", ["make lint", "make typecheck"], False),
        ("make:lint=2,make:typecheck=2", ["make lint", "make typecheck"], False),
        ("make:test=2", ["make lint", "make typecheck", "make test"], False),
    ],
)
def test_ci_runs_lint_and_mypy_before_the_tests_and_stops_on_either(
    tmp_path: Path, fail: str, called: list[str], ok: bool
) -> None:
    _recorder(tmp_path / "bin", "make")
    code, calls, out = _run([str(CI_RUN)], tmp_path, fail, tmp_path / "bin")
    assert calls == called, out
    assert (code == 0) is ok, out
    if "make test" not in calls:
        assert "the tests were not run" in out


def _fake_venv(tmp_path: Path, *tools: str) -> Path:
    """A project folder with a pyproject.toml and a VENV whose install stamp is newer (so the
    Makefile does not install), its ``tools`` recorders."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "pyproject.toml", project / "pyproject.toml")
    venv = tmp_path / "venv"
    _recorder(venv / "bin", *tools)
    stamp = venv / ".installed-dev"
    stamp.touch()
    older = (project / "pyproject.toml").stat().st_mtime - 60
    os.utime(project / "pyproject.toml", (older, older))
    return project


def _make(project: Path, target: str, tmp_path: Path, fail: str) -> tuple[int, list[str], str]:
    cmd = ["make", "-s", "-f", str(REPO / "Makefile"), "-C", str(project), target]
    return _run([*cmd, f"VENV={tmp_path / 'venv'}"], tmp_path, fail)


@pytest.mark.parametrize(
    ("fail", "ok"),
    [("", True), ("ruff:check=1", False), ("ruff:format=1", False), ("lint-imports=1", False)],
)
def test_make_lint_runs_ruff_format_and_the_contracts_and_fails_if_any_fails(
    tmp_path: Path, fail: str, ok: bool
) -> None:
    project = _fake_venv(tmp_path, "ruff", "lint-imports")
    code, calls, out = _make(project, "lint", tmp_path, fail)
    assert calls == ["ruff check .", "ruff format --check .", "lint-imports"], out
    assert (code == 0) is ok, out


def test_make_typecheck_runs_mypy_on_every_package(tmp_path: Path) -> None:
    project = _fake_venv(tmp_path, "mypy")
    code, calls, out = _make(project, "typecheck", tmp_path, "mypy=1")
    packages = "driftline collector alerts drift judges serving dashboard"
    assert calls == [f"mypy {packages}"] and code != 0, out
    imported = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()}
    assert imported - {"tests", "benchmarks", "migrations"} <= set(packages.split())


def test_make_lint_fails_on_a_real_ruff_error(tmp_path: Path) -> None:
    """The real ruff in the target: an unused import fails ``make lint`` and is named."""
    project = _fake_venv(tmp_path, "lint-imports")
    ruff = REPO / ".venv" / "bin" / "ruff"
    if not ruff.exists():
        pytest.skip("no .venv/bin/ruff (run `make` once)")
    (tmp_path / "venv" / "bin" / "ruff").symlink_to(ruff)
    (project / "clean.py").write_text('"""Clean."""\n\nfrom __future__ import annotations\n')
    code, _, out = _make(project, "lint", tmp_path, "")
    assert code == 0, out
    (project / "bad.py").write_text(
        '"""Bad."""\n\nfrom __future__ import annotations\n\nimport os\n'
    )
    code, calls, out = _make(project, "lint", tmp_path, "")
    assert code != 0 and "bad.py" in out and "F401" in out
    assert calls == ["lint-imports"]  # ran although ruff had failed
