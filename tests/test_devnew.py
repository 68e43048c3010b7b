"""``flashtutor dev new``: a scaffold in a temporary content root that parses,
runs through the real harness, and fails ``dev check`` with rows that say what
to write next."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers_harness import REPO, run_cli

from tutor.authoring import derived, devcheck, devnew
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
    [kernel, toml, solution, _] = devnew.scaffold("alibi_bias", root=root, drill_id="30")
    derived.sync(root)  # as `dev new` does after the scaffold

    report = devcheck.run(root=root, quick=True, drill="30")

    assert not report.ok
    placeholders = [r for r in report.failed if r.check == "placeholders"]
    assert {r.check for r in report.failed} == {"placeholders"}
    wheres = {r.where.rsplit(":", 1)[0] for r in placeholders}
    assert wheres == {"drills/30_alibi_bias.toml", "drills/30_alibi_bias.py", "solutions/30_alibi_bias_solution.py"}
    competency = next(r for r in placeholders if "competency" in r.detail)
    line = next(n for n, text in enumerate(toml.read_text().splitlines(), 1) if text.startswith("competency"))
    assert competency.where == f"drills/30_alibi_bias.toml:{line}"
    assert competency.detail == "write this, then delete the AUTHOR: marker: the interview competency, in a few words"
    # the other drills are untouched and still green
    assert devcheck.run(root=root, quick=True, drill="02").ok


@pytest.mark.slow
def test_a_fresh_scaffold_runs_and_the_check_says_to_cut_the_lesson_out(root):
    devnew.scaffold("alibi_bias", root=root, drill_id="30")

    report = devcheck.run(root=root, drill="30")

    rows = {r.check: r for r in report.rows}
    assert rows["solution"].ok, rows["solution"].detail  # the scaffolded solution is a real, passing kernel
    assert rows["fixture no_final_division"].ok and rows["fixture blocks_of_32"].ok
    assert not rows["shipped"].ok
    assert rows["shipped"].detail.startswith("the shipped file drills/30_alibi_bias.py PASSES")


# -- --problem: a drill of another problem, a new problem ---------------------------------------
def test_a_drill_of_another_problem_starts_from_that_problems_first_drill(root):
    written = devnew.scaffold("paged_thing", root=root, drill_id="31", problem="split_kv_decode")
    kernel, toml, solution, mistakes = written
    drill = read_drill(toml)
    template = read_drill(root / "drills" / "05_split_kv_decode.toml")
    assert (drill.problem, drill.modes, drill.tolerance) == ("split_kv_decode", template.modes, template.tolerance)
    assert set(drill.diagnoses) == set(template.diagnoses)  # the problem's codes keep their words
    body = (root / "solutions" / template.solution).read_text().split('"""\n', 1)[1]
    assert kernel.read_text().endswith(body.replace('drill="05"', 'drill="31"'))
    assert solution.read_text().endswith(body.replace('drill="05"', 'drill="31"'))
    assert mistakes_mod.load(drill, root) == []
    derived.sync(root)
    report = devcheck.run(root=root, quick=True, drill="31")
    failed = {r.check for r in report.failed}
    assert failed == {"placeholders", "code fixtures"}, report.failed
    assert any("competency" in r.detail for r in report.failed if r.check == "placeholders")


def test_a_new_problem_gets_a_registered_skeleton_that_fails_loudly(root, tmp_path):
    import importlib.util

    from tutor.harness.problems import Problem

    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(REPO / "tutor" / "harness" / "problems" / "__init__.py", problems / "__init__.py")
    written = devnew.scaffold("ring_buffer", root=root, drill_id="32", problem="ring_decode", problems_dir=problems)
    assert written[-2:] == [problems / "ring_decode.py", problems / "__init__.py"]
    assert '    "ring_decode": "tutor.harness.problems.ring_decode",\n}' in (problems / "__init__.py").read_text()
    assert read_drill(written[1]).problem == "ring_decode"
    spec = importlib.util.spec_from_file_location("ring_decode", problems / "ring_decode.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert isinstance(module.PROBLEM, Problem)
    with pytest.raises(NotImplementedError, match="check_correctness is not written yet"):
        module.PROBLEM.check_correctness(None, None, True, "cpu", None)
    assert devnew.MARKER in (problems / "ring_decode.py").read_text()


def test_a_new_problem_outside_the_packages_clone_is_refused_and_writes_nothing(root):
    before = sorted(p.name for p in (root / "drills").iterdir())
    result = run_cli("dev", "new", "ring_buffer", "--problem", "ring_decode", "--root", root)
    assert result.returncode == 2 and "its module goes into the package" in result.stderr
    assert sorted(p.name for p in (root / "drills").iterdir()) == before


# -- derived files: the README tables and the manifest ------------------------------------------
def test_sync_writes_the_new_drills_rows_and_check_reports_stale_tables(root):
    shutil.copy(REPO / "README.md", root / "README.md")
    assert run_cli("dev", "sync", "--check", "--root", root).returncode == 0
    devnew.scaffold("alibi_bias", root=root, drill_id="33")  # the API writes no derived file
    stale = run_cli("dev", "sync", "--check", "--root", root)
    assert stale.returncode == 1 and "README.md" in stale.stdout
    assert any(r.check == "derived" for r in devcheck.run(root=root, quick=True).failed)
    assert run_cli("dev", "sync", "--root", root).returncode == 0
    for readme in (root / "README.md", root / "drills" / "README.md"):
        text = readme.read_text()
        row = next(line for line in text.splitlines() if line.startswith("| 33 |"))
        assert "AUTHOR:" in row  # the scaffold's summary, until the author writes it
        assert text.index(derived.BEGIN) < text.index("| 33 |") < text.index(derived.END)
    assert run_cli("dev", "sync", "--check", "--root", root).returncode == 0
    assert not any(r.check == "derived" for r in devcheck.run(root=root, quick=True).failed)


def test_the_repositorys_own_drill_tables_are_current():
    """README.md's and drills/README.md's tables say what the drills' TOML says
    (`flashtutor dev sync` rewrites them; the manifest has its own test, which
    allows a student's edited drills: tests/test_pristine.py)."""
    from tutor.pristine import MANIFEST

    assert [path for path in derived.stale(REPO) if path != MANIFEST] == []


def test_a_readme_without_markers_is_said_not_overwritten(root):
    (root / "README.md").write_text("# hand-written, no table markers\n")
    result = run_cli("dev", "sync", "--root", root)
    assert result.returncode == 1 and "mark where the drills table goes" in result.stderr
    assert (root / "README.md").read_text() == "# hand-written, no table markers\n"
