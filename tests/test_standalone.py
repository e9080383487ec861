"""The repository stands alone: no test or benchmark reads a file outside the checkout, and
every design note the code cites is in ``docs/``.

A clone with nothing beside it must pass ``make test``; the suite once read its OTLP cases,
price table and Dolly prompts from a folder beside the checkout, and its modules cited notes
kept there. These checks read the source (no test has to run to find the leak): a path literal
that names that folder, or a ``Path(__file__)`` climb past the repository root. The folder's
name is spelt in pieces here, so that a plain grep of tests/ and benchmarks/ for it finds
nothing (the issue's own check).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.fixtures import CASES, DOLLY, FIXTURES, PRICE_FIXTURE, dolly_lines

REPO = Path(__file__).resolve().parents[1]
#: the folder beside the checkout the suite once read (spelt in pieces, see above)
BESIDE = "sha" + "red"
#: folders whose code must read only inside the repository
READERS = ("tests", "benchmarks")
#: a literal naming the folder beside the checkout, or an absolute path of this machine
OUTSIDE = re.compile(
    rf"""\.\./{BESIDE}|parent\s*/\s*["']{BESIDE}["']|/{BESIDE}/|["']/work/|\bREPO\.parent\b"""
)
#: ``Path(__file__)`` (resolved or not) climbing with ``.parents[k]`` then ``.parent`` * n
CLIMB = re.compile(
    r"Path\(__file__\)(?:\.resolve\(\))?"
    r"(?:\.parents\[(?P<k>\d+)\])?(?P<parents>(?:\.parent\b)*)"
)
#: the project's own notes, cited by name in docstrings and comments
NOTE = re.compile(r"(?<![\w.-])((?:[\w-]+/)*[\w-]+\.md)\b")


def _sources(*folders: str, suffixes: tuple[str, ...] = (".py",)) -> list[Path]:
    out: list[Path] = []
    for folder in folders:
        out += [
            p
            for p in sorted((REPO / folder).rglob("*"))
            if p.suffix in suffixes and "fixtures" not in p.relative_to(REPO).parts
        ]
    return out


def outside_reads(path: Path, text: str) -> list[str]:
    """``line: excerpt`` for each place in ``text`` (the source of ``path``, a file in the
    repository) that names a path outside the repository: a literal of :data:`OUTSIDE`, or a
    ``Path(__file__)`` climb more levels up than ``path`` lies below the root."""
    depth = len(path.relative_to(REPO).parts) - 1  # folders between the root and the file
    found: list[str] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if OUTSIDE.search(line):
            found.append(f"{n}: {line.strip()}")
            continue
        for m in CLIMB.finditer(line):
            levels = (int(m["k"]) + 1 if m["k"] is not None else 0) + m["parents"].count(".parent")
            if levels > depth + 1:  # the first level is the file's own folder
                found.append(f"{n}: {line.strip()}")
    return found


def test_no_test_or_benchmark_reads_outside_the_repository() -> None:
    leaks = {
        str(p.relative_to(REPO)): hits
        for p in _sources(*READERS)
        if p != Path(__file__).resolve()  # its own examples below
        if (hits := outside_reads(p, p.read_text(encoding="utf-8")))
    }
    assert leaks == {}


@pytest.mark.parametrize(
    ("relative", "source", "leaks"),
    [
        ("tests/drift/x.py", f'CASES = Path(__file__).parents[2].parent / "{BESIDE}" / "cases"', 1),
        ("tests/support/x.py", 'D = Path(__file__).resolve().parents[3] / "data"', 1),
        ("tests/x.py", "D = Path(__file__).parent.parent.parent / 'cases'", 1),
        ("benchmarks/x.py", f'DOLLY = REPO.parent / "{BESIDE}" / "data"', 1),
        ("benchmarks/x.py", 'OTHER = REPO.parent / "other-checkout"', 1),
        ("tests/x.py", f'open("../{BESIDE}/cases/EXPECTED.md")', 1),
        ("tests/x.py", f'Path("/work/{BESIDE}/data")', 1),
        ("tests/x.py", f'Path("/tmp/{BESIDE}/cases")', 1),
        ("tests/drift/x.py", 'REPO = Path(__file__).resolve().parents[2] / ".cache"', 0),
        ("tests/x.py", "HERE = Path(__file__).parent.parent  # the root", 0),
        ("tests/support/x.py", "F = Path(__file__).resolve().parents[1] / 'fixtures'", 0),
    ],
)
def test_the_check_catches_each_way_out(relative: str, source: str, leaks: int) -> None:
    """The check above on lines written each way a test once left the checkout, and on
    climbs that stay inside it."""
    assert len(outside_reads(REPO / relative, source)) == leaks


def test_the_fixtures_are_in_the_repository() -> None:
    assert FIXTURES.is_relative_to(REPO) and PRICE_FIXTURE.is_file()
    names = {p.name for p in CASES.iterdir()}
    assert {"EXPECTED.md", "00_price_table.json", "03_gzip_body.json.gz"} <= names
    assert len([n for n in names if re.match(r"\d\d_.*\.json$", n)]) == 18
    lines = dolly_lines()
    assert len(lines) == 14_994 and DOLLY.stat().st_size < 5 * 2**20
    attribution = (DOLLY.parent / "dolly15k_prompts.ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "CC BY-SA 3.0" in attribution and "Databricks" in attribution


def _notes() -> dict[str, Path]:
    """The project's notes by file name (``docs/**.md``; README.md is left out: many external
    sources cite a README of their own)."""
    return {p.name: p for p in (REPO / "docs").rglob("*.md") if p.name != "README.md"}


def cited_notes_missing(text: str, notes: dict[str, Path]) -> list[str]:
    """The citations in ``text`` of a note named like one of ``notes`` that do not resolve:
    the path as written from the root, or under ``docs/``, or a bare name found in ``docs/``.
    A citation through the folder beside the checkout never resolves."""
    missing: list[str] = []
    for m in NOTE.finditer(text):
        cited = m[1]
        if Path(cited).name not in notes:
            continue  # another project's document (vllm docs/design/metrics.md, ...)
        ok = f"{BESIDE}/" not in cited and (
            (REPO / cited).is_file()
            or (REPO / "docs" / cited).is_file()
            or cited == Path(cited).name
        )
        if not ok:
            missing.append(cited)
    return missing


def test_every_note_the_code_cites_is_in_docs() -> None:
    notes = _notes()
    assert {"DESIGN.md", "STYLE.md", "architecture.md", "vllm-cpu.md"} <= set(notes)
    assert {"drift-canary-judge-methods.md", "otel-genai-otlp-webhooks.md"} <= set(notes)
    packages = ("collector", "driftline", "drift", "judges", "alerts", "dashboard", "serving")
    missing = {
        str(p.relative_to(REPO)): hits
        for p in [
            *_sources(*packages, *READERS, "migrations"),
            *_sources("docs", suffixes=(".md",)),
            REPO / "README.md",
        ]
        if "reference" not in p.relative_to(REPO).parts[:2]  # external research notes
        if p != Path(__file__).resolve()  # its own examples below
        if (hits := cited_notes_missing(p.read_text(encoding="utf-8"), notes))
    }
    assert missing == {}


def test_a_citation_through_the_folder_beside_is_missing() -> None:
    notes = _notes()
    cited = f"{BESIDE}/reference/drift-canary-judge-methods.md"
    text = f"({cited} §1.1) and ``reference/vllm-cpu.md``"
    assert cited_notes_missing(text, notes) == [cited]
    assert cited_notes_missing("see DESIGN.md and docs/STYLE.md", notes) == []
    assert cited_notes_missing("docs/nowhere/DESIGN.md", notes) == ["docs/nowhere/DESIGN.md"]


def test_the_architecture_page_names_files_that_exist() -> None:
    """docs/architecture.md is read off the code: each file or folder it names in backticks
    (``collector/spool/log.py``; ``lake/seal.py`` within its package or sub-package) exists,
    so a move that leaves the page behind fails here."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = [p for p in REPO.iterdir() if (p / "__init__.py").is_file()]
    packages += [sub for p in packages for sub in p.iterdir() if (sub / "__init__.py").is_file()]
    named = set(re.findall(r"`((?:[\w.-]+/)+[\w.-]*)`", page))
    missing = sorted(
        p
        for p in named
        if not p.startswith("/")  # a URL path (/metrics)
        and not any((base / p).exists() for base in [REPO, *packages])
    )
    assert len(named) > 40 and missing == []
