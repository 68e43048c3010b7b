"""``flashtutor dev new``: a scaffold in a temporary content root that parses,
runs through the real harness, and fails ``dev check`` with rows that say what
to write next."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers_harness import REPO, run_cli

from tutor.authoring import devcheck, devnew
from tutor.authoring import student_kernels as mistakes_mod
from tutor.catalog import read_drill


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "content"
    for folder in ("drills", "solutions"):
        shutil.copytree(REPO / folder, root / folder)
    return root


def test_new_writes_the_four_files_with_the_next_id(root):
    next_id = f"{max(int(p.name[:2]) for p in (root / 'drills').glob('[0-9][0-9]_*')) + 1:02d}"
    result = run_cli("dev", "new", "alibi_bias", "--root", root)
    assert result.returncode == 0, result.stderr
    stem = f"{next_id}_alibi_bias"
    written = [root / "drills" / f"{stem}.py", root / "drills" / f"{stem}.toml",
               root / "solutions" / f"{stem}_solution.py", root / "solutions" / f"{stem}.mistakes.toml"]
    assert all(path.is_file() for path in written)
    assert f"flashtutor dev check --drill {next_id} --quick --root {root}" in result.stdout
    drill = read_drill(written[1])
    assert (drill.id, drill.slug, drill.kind, drill.problem, drill.file) == (next_id, "alibi_bias", "kernel",
                                                                              "attention", f"{stem}.py")
    assert drill.shipped is not None and not drill.shipped.passes
    entries = mistakes_mod.load(drill, root)
    assert [m.name for m in entries] == ["no_final_division", "blocks_of_32"]
    assert all(m.text(drill, root) for m in entries)  # every edit applies to the solution
    # the same name again, or a bad one, is refused without touching anything
    again = run_cli("dev", "new", "alibi_bias", "--root", root, "--id", next_id)
    assert again.returncode == 2 and f"id {next_id} is taken" in again.stderr
    with pytest.raises(devnew.ScaffoldError, match="lower-case words"):
        devnew.scaffold("Alibi-Bias", root=root)


def test_a_fresh_scaffold_fails_quick_check_with_what_to_write(root):
    [kernel, toml, solution, _] = devnew.scaffold("alibi_bias", root=root, drill_id="07")

    report = devcheck.run(root=root, quick=True, drill="07")

    assert not report.ok
    placeholders = [r for r in report.failed if r.check == "placeholders"]
    assert {r.check for r in report.failed} == {"placeholders"}
    wheres = {r.where.rsplit(":", 1)[0] for r in placeholders}
    assert wheres == {"drills/07_alibi_bias.toml", "drills/07_alibi_bias.py", "solutions/07_alibi_bias_solution.py"}
    competency = next(r for r in placeholders if "competency" in r.detail)
    line = next(n for n, text in enumerate(toml.read_text().splitlines(), 1) if text.startswith("competency"))
    assert competency.where == f"drills/07_alibi_bias.toml:{line}"
    assert competency.detail == "write this, then delete the AUTHOR: marker: the interview competency, in a few words"
    # the other drills are untouched and still green
    assert devcheck.run(root=root, quick=True, drill="02").ok


@pytest.mark.slow
def test_a_fresh_scaffold_runs_and_the_check_says_to_cut_the_lesson_out(root):
    devnew.scaffold("alibi_bias", root=root, drill_id="07")

    report = devcheck.run(root=root, drill="07")

    rows = {r.check: r for r in report.rows}
    assert rows["solution"].ok, rows["solution"].detail  # the scaffolded solution is a real, passing kernel
    assert rows["fixture no_final_division"].ok and rows["fixture blocks_of_32"].ok
    assert not rows["shipped"].ok
    assert rows["shipped"].detail.startswith("the shipped file drills/07_alibi_bias.py PASSES")
