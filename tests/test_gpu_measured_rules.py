"""Rules an H200 run found missing (run 17), held on the CPU where the same measurement
exists: a visit map whose stores land outside it is not read for blocks; a mistakes
entry's ``gpu_codes`` are what a compiled check must say; a drill-08 read-out finding
beside a store outside the output says what else shows the same; drills 08 and 09
compile every GPU case's variant at once."""

from __future__ import annotations

from pathlib import Path

from helpers_harness import check_one

from tutor.authoring import devcheck
from tutor.authoring import student_kernels as mistakes
from tutor.catalog import get_drill
from tutor.harness import guarded
from tutor.harness.problems import block_sparse, problem_for, varlen_attention
from tutor.harness.result import CheckResult, Device, GuardFinding, code_name


def _finding(tensor: str, access: str = "write") -> GuardFinding:
    return GuardFinding(tensor, "after", access, "short", False, [1, 2, 3, 4], 4)  # type: ignore[arg-type]


def test_a_store_in_a_visit_maps_margin_marks_every_map_untrusted():
    assert guarded.visit_map_overrun([_finding("visit map")])
    assert guarded.visit_map_overrun([_finding("K"), _finding("dK/dV visit map")])
    assert not guarded.visit_map_overrun([_finding("output"), _finding("K")])
    assert not guarded.visit_map_overrun([_finding("visit map", "read")])  # a read is not a misplaced store


def _entry(**fields: object) -> mistakes.Mistake:
    base = dict(drill="04", name="x", base="solution", says="x", codes=("d-wrong",), passes=False, edits=())
    return mistakes.Mistake(**{**base, **fields})  # type: ignore[arg-type]


def test_gpu_codes_are_what_a_compiled_check_must_say_and_default_to_the_codes():
    plain = _entry()
    assert plain.expected(gpu=False) == plain.expected(gpu=True) == "d-wrong"
    entry = _entry(gpu_codes=("error:compile",))
    assert (entry.expected(gpu=False), entry.expected(gpu=True)) == ("d-wrong", "error:compile")
    assert _entry(codes=("read-past-end-unused",), passes=True, gpu_codes=()).expected(gpu=True) == "solved"


def test_dev_check_reads_gpu_codes_only_for_a_check_compiled_for_a_gpu():
    entry = _entry(gpu_codes=("error:compile",))
    fixture = devcheck._Fixture("fixture x", None, False, entry.codes, "", entry)
    on = {kind: CheckResult(drill="04", file="x.py", device=Device(kind=kind, name=kind, interpreter=kind == "cpu",
                                                                   torch="", triton=""))
          for kind in ("cpu", "cuda")}
    assert devcheck._documented_codes(fixture, on["cpu"]) == ("d-wrong",)
    assert devcheck._documented_codes(fixture, on["cuda"]) == ("error:compile",)


def test_every_gpu_code_named_in_a_mistakes_file_has_words_in_its_drill():
    for entry in mistakes.all_mistakes():
        for code in entry.gpu_codes or ():
            assert code.startswith("error:") or code_name(code) in get_drill(entry.drill).diagnoses, (
                entry.stem, code)


def test_drills_08_and_09_warm_every_gpu_case_variant_at_once():
    class Blocks:  # what the warm-ups read from a student's module before launching anything
        BLOCK_M = 64
        BLOCK_N = 64

    for drill, cases in (("08", varlen_attention.cases_for(False, 64, 64)), ("09", block_sparse.GPU_CASES)):
        warmups = problem_for(get_drill(drill).problem).compile_warmups
        assert warmups is not None, drill
        assert len(warmups(get_drill(drill), Blocks, "cpu")) == len(cases), drill  # type: ignore[arg-type]


def test_a_drill_08_readout_beside_a_store_outside_the_output_says_what_else_shows_it(tmp_path: Path):
    entry = next(m for m in mistakes.load(get_drill("08")) if m.name == "queries_at_key_start")
    file = mistakes.materialise(tmp_path)[entry.stem]
    result = check_one(file)
    said = {d.code: d.message for d in result.diagnosis}
    assert "store-out-of-bounds" in said and "reads-other-sequence" in said
    assert varlen_attention.OVERRUN_CAVEAT.strip() in said["reads-other-sequence"]


def test_a_code_marked_maybe_may_be_said_or_not_but_only_in_its_place():
    from tutor.harness.result import Diagnosis, codes_match

    def said(*codes: str) -> list[Diagnosis]:
        return [Diagnosis(code=c, message="", severity="error") for c in codes]

    documented = ["wrong-output", "nan-in-output?"]
    assert codes_match(said("wrong-output"), documented)
    assert codes_match(said("wrong-output", "nan-in-output"), documented)
    assert not codes_match(said("nan-in-output", "wrong-output"), documented)  # out of its place
    assert not codes_match(said("nan-in-output"), documented)  # the required code is missing
    assert not codes_match(said("wrong-output", "nan-in-output", "reads-past-length"), documented)
    assert not codes_match(said("a"), ["a", "b"])
