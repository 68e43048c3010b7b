"""Shared by the mistakes-file tests of drills 01 and 02 (one test file per drill, so
that `pytest -n auto --dist loadfile` runs the two drills' checks side by side)."""

from __future__ import annotations

from pathlib import Path

from helpers_harness import check_files, check_jobs, job

from tutor.authoring import student_kernels as mistakes
from tutor.catalog import get_drill
from tutor.harness.result import CheckResult, code_name


def entries(drill: str) -> dict[str, mistakes.Mistake]:
    return {m.stem: m for m in mistakes.all_mistakes() if m.drill == drill}


def check_entries(dest: Path, drill: str, extra: dict[str, Path] | None = None,
                  seeded: dict[str, int] | None = None) -> dict[str, CheckResult]:
    """Check every entry of ``drill``'s mistakes file (and the ``extra`` files) in workers;
    the entries ``seeded`` names at their seed (a code the random inputs decide on some runs)."""
    seeded = seeded or {}
    written = {stem: path for stem, path in mistakes.materialise(dest).items() if stem in entries(drill)}
    files = {stem: path for stem, path in {**written, **(extra or {})}.items() if stem not in seeded}
    results = check_files(list(files.values()))
    at_seed = check_jobs([job(written[stem], seed=seed) for stem, seed in seeded.items()]) if seeded else []
    return {stem: results[path] for stem, path in files.items()} | dict(zip(seeded, at_seed, strict=True))


def assert_covers(found: dict[str, mistakes.Mistake], correct_variants: set[str]) -> None:
    """The file holds the correct-but-different kernels the issue names; every wrong one
    names its diagnosis, and every code it names has words in the drill."""
    assert correct_variants <= {stem for stem, m in found.items() if m.passes and not m.codes}
    for stem, m in found.items():
        assert all(code in get_drill(m.drill).diagnoses for code in m.codes), stem
        assert m.passes or m.codes, f"{stem}: a wrong kernel must name its diagnosis"
        gpu = [code_name(c) for c in (m.gpu_codes or ()) if not c.startswith("error:")]
        assert all(code in get_drill(m.drill).diagnoses for code in gpu), stem


def said(result: CheckResult, listed: tuple[str, ...] = ()) -> list[str]:
    """The codes said at error and finding level, and any info note among ``listed``."""
    return result.codes_said(listed)


def assert_gets_its_verdict(entry: mistakes.Mistake, result: CheckResult) -> None:
    """Exactly the entry's verdict and codes; messages filled in; read-out only when failing."""
    assert result.error is None, result.error
    assert result.passed is entry.passes, [d.message for d in result.diagnosis]
    assert said(result, entry.codes) == list(entry.codes), [d.message for d in result.diagnosis]
    for diagnosis in result.diagnosis:
        assert "{" not in diagnosis.message
    if entry.passes:  # a correct kernel (with or without a finding such as extra blocks) is never read out
        findings = [d.code for d in result.diagnosis if d.severity == "finding"]  # an info note leaves it solved
        assert result.solved is (not findings) and not result.readout
    elif any(not case.passed for case in result.cases if case.name not in ("hostile", "long-sum")):
        assert result.readout, "a failing check reads out the failing modes"
