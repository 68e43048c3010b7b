"""On a GPU (skipped without one): compiling a check's variants concurrently
(the default) gives the same verdict, diagnosis and visit maps as compiling them
one after another (``FLASHTUTOR_PARALLEL_COMPILE=0``), for a passing and a
failing kernel."""

from __future__ import annotations

import pytest

from tutor.catalog import get_drill, solution_path
from tutor.harness.check import PARALLEL_COMPILE_ENV
from tutor.loop.runner import CheckRunner
from tutor.pristine import shipped_text

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _verdict(file, monkeypatch, parallel: str):
    monkeypatch.setenv(PARALLEL_COMPILE_ENV, parallel)  # the worker inherits the environment
    with CheckRunner(device="gpu", warm=False) as runner:
        result = runner.check("01", file, seed=0)
    return (result.outcome, [d.code for d in result.diagnosis], [c.passed for c in result.cases],
            result.visits.counts if result.visits else None, result.performance.status)


@pytest.mark.parametrize("which", ["solution", "shipped"])
def test_parallel_and_serial_compiles_give_the_same_verdict(which, monkeypatch, tmp_path):
    drill = get_drill("01")
    file = solution_path(drill)
    if which == "shipped":
        file = tmp_path / drill.file
        file.write_text(shipped_text(drill.file)[0], encoding="utf-8")
    serial = _verdict(file, monkeypatch, "0")
    parallel = _verdict(file, monkeypatch, "1")
    assert parallel == serial
    assert serial[0] == ("solved" if which == "solution" else "failed")


def test_forked_children_compile_every_variant_and_the_verdict_loads_them(tmp_path):
    """Drill 04's solution with a fresh comment in every kernel (nothing on disk):
    every recorded variant compiles in a forked child (none fails or hangs), and the
    verdict after it passes with the variants the children wrote."""
    import uuid

    from tutor.harness import cost, forked_compile
    from tutor.harness.check import compile_concurrently
    from tutor.harness.loader import load_student_module
    from tutor.harness.problems import problem_for

    drill = get_drill("04")
    nonce = uuid.uuid4().hex
    text = "\n".join(line + (f"  # {nonce}" if line.startswith("def _") else "")  # Triton hashes the source
                     for line in solution_path(drill).read_text().splitlines())
    file = tmp_path / drill.file
    file.write_text(text + "\n")
    module = load_student_module(file, file.read_bytes())
    problem = problem_for(drill.problem)
    assert problem.compile_warmups is not None
    warmups = problem.compile_warmups(drill, module, "cuda")
    cost.install()
    recorded = []
    for warmup in warmups:
        with cost.compile_only() as calls:
            warmup()
        recorded += calls
    assert len(recorded) >= 4
    assert forked_compile.fill_disk_cache(recorded) == len(recorded)
    compile_concurrently(warmups)
    found = problem.check_correctness(drill, module, False, "cuda", torch.Generator().manual_seed(0))
    assert all(case.passed for case in found.cases)
