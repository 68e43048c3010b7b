"""Two files that cannot run, reported at the student's line.

A drill file that is not UTF-8 used to come back as a runtime
`UnicodeDecodeError` at a byte offset; a launcher with the wrong signature as
Python's TypeError with no line.  Now: "not UTF-8 text (line N)", and the
launcher's `def` line with the signature the tutor calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_harness import check_one, shipped_solution

from tutor.harness.loader import LoadFailed, load_student_module

pytestmark = pytest.mark.slow


def test_a_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    lines = shipped_solution("01").read_bytes().split(b"\n")
    lines.insert(4, "# noted in a Latin-1 editor: café".encode("latin-1"))
    file = tmp_path / "01_causal_mask.py"
    file.write_bytes(b"\n".join(lines))
    with pytest.raises(LoadFailed) as failed:
        load_student_module(file)
    error = failed.value.error
    assert error.kind == "syntax" and error.line == 5
    assert error.message.startswith("not UTF-8 text (line 5): byte e9 cannot be read")
    assert error.source_line is not None and error.source_line.startswith("# noted in a Latin-1 editor: caf")
    result = check_one(file)  # and so in a real worker
    assert result.error is not None and result.error.message == error.message and result.error.line == 5
    assert "UnicodeDecodeError" not in result.error.message


@pytest.mark.parametrize(("drill", "wrong", "expected"), [
    ("01", "def attention(q, k, v, causal=False, out=None):",
     "def attention(q, k, v, causal=False, out=None, visits=None)"),
    ("02", "def attention(q, k, v, o=None, visits=None):", "def attention(q, k, v, out=None, visits=None)"),
])
def test_a_launcher_with_the_wrong_signature_points_at_its_def(tmp_path: Path, drill, wrong, expected) -> None:
    source = shipped_solution(drill).read_text()
    shipped_def = next(line for line in source.splitlines() if line.startswith("def attention("))
    file = tmp_path / shipped_solution(drill).name
    file.write_text(source.replace(shipped_def, wrong))
    result = check_one(file, drill)
    error = result.error
    assert error is not None and not result.passed
    assert error.line == file.read_text().splitlines().index(wrong) + 1 and error.source_line == wrong
    assert f"expected: {expected}" in error.message and "unexpected keyword argument" in error.message


def test_a_libdevice_call_is_said_to_be_the_interpreters_limit_not_a_compile_error(tmp_path: Path) -> None:
    """Triton's interpreter calls libdevice's empty placeholders (they return None); on a GPU
    the same kernel is right.  The report names the libdevice line and the way out."""
    text = shipped_solution("01").read_text(encoding="utf-8")
    text = text.replace("import triton.language as tl\n",
                        "import triton.language as tl\nfrom triton.language.extra import libdevice\n", 1)
    text = text.replace("        p = tl.exp2(qk - m_new[:, None])",
                        "        p = libdevice.exp2(qk - m_new[:, None])", 1)
    file = tmp_path / "01_causal_mask.py"
    file.write_text(text, encoding="utf-8")
    result = check_one(file)
    if result.device.interpreter:
        error = result.error
        assert error is not None and error.kind == "runtime"
        assert error.message.startswith("Triton's CPU interpreter cannot run libdevice functions")
        assert "compile error" not in error.message
        assert error.source_line == "        p = libdevice.exp2(qk - m_new[:, None])"
    else:
        assert result.solved, (result.error, result.codes)


def test_a_block_pointer_on_a_triton_without_them_says_what_to_use_instead(tmp_path):
    """Triton 3.9 (the CPU interpreter's) removed tl.make_block_ptr: the error says so and
    names what to write instead, not just Triton's NotImplementedError."""
    from tutor.harness import errors

    file = tmp_path / "01_k.py"
    file.write_text("x = 1\n", encoding="utf-8")
    said = errors.from_exception(NotImplementedError("Block pointers have been removed in favor of the tensor "
                                                     "descriptor API"), str(file), None, "runtime")
    assert said.kind == "compile"
    assert "tl.make_tensor_descriptor" in said.message and "pointer offsets and masks" in said.message


def test_a_gpu_fault_in_a_readout_launch_is_named_as_the_kernels_stray_address() -> None:
    """A read-out launch that faults on a GPU (drill 07's contiguous-per-sequence kernel did, run 21)
    says the kernel's addresses left its memory, keeps the verdict and names no mistake; any
    other error is passed on as it was raised."""
    from tutor.harness.errors import readout_failure_reason
    from tutor.harness.result import CheckError

    fault = CheckError(kind="runtime", message="AcceleratorError: CUDA error: an illegal memory access was encountered",
                       file=None, line=None)
    reason = readout_failure_reason(fault)
    assert "outside the memory it was given" in reason and "The verdict stands" in reason
    other = CheckError(kind="runtime", message="ValueError: bad", file=None, line=None)
    assert readout_failure_reason(other) == "a read-out launch raised: ValueError: bad"


def test_a_readout_that_fails_in_the_tutors_own_code_says_so_and_where(tmp_path: Path) -> None:
    """An exception raised in the tutor's read-out code, with no launch of the student's kernel on
    the stack (GPU run 31: a read-out mixed a CPU and a CUDA tensor), is said as the tutor's bug at
    its own line, not as the student's launch; one raised through the student's file is theirs."""
    from tutor.harness import errors
    from tutor.harness.result import CheckError

    student = tmp_path / "drill.py"
    student.write_text("def launch(x):\n    return x.missing\n", encoding="utf-8")
    from tutor.harness.problems.attention.readout import allowed_keys

    try:
        allowed_keys(-1, True)  # the tutor's own code given what it cannot take
    except RuntimeError as exc:
        where = errors.tutor_fault(exc, str(student))
    assert where is not None and where.startswith("tutor/harness/problems/attention/readout.py:")
    assert where.endswith("in allowed_keys")
    namespace: dict[str, object] = {}
    exec(compile(student.read_text(encoding="utf-8"), str(student), "exec"), namespace)
    try:
        namespace["launch"](object())  # type: ignore[operator]
    except AttributeError as exc:
        assert errors.tutor_fault(exc, str(student)) is None
    fault = CheckError(kind="runtime", message="RuntimeError: two devices", file=str(student), line=None)
    reason = errors.readout_failure_reason(fault, "tutor/harness/x.py:3 in f")
    assert "the tutor's own read-out code failed, not your kernel" in reason and "tutor/harness/x.py:3" in reason


def test_a_tutor_file_that_does_not_parse_is_the_tutors_fault_not_the_kernels(tmp_path: Path) -> None:
    """Blind round 27: a check that imported one of the tutor's modules while it was being
    edited came back as the student's SyntaxError.  A SyntaxError raised in the tutor's own
    source is an internal error, at the tutor's file and line; one in the student's file
    stays theirs."""
    from tutor.harness import errors

    student = tmp_path / "01_k.py"
    student.write_text("x = (\n", encoding="utf-8")
    tutor_file = Path(errors.__file__).resolve().parent / "problems" / "attention" / "diagnose.py"
    raised = []
    for source, name in (("def f(:\n", str(tutor_file)), ("x = (\n", str(student))):
        with pytest.raises(SyntaxError) as caught:
            compile(source, name, "exec")
        raised.append(caught.value)
    theirs, ours = (errors.from_exception(raised[0], str(student), None, "import"),
                    errors.from_exception(raised[1], str(student), None, "import"))
    assert theirs.kind == "internal" and theirs.file == str(tutor_file) and theirs.line == 1
    assert "not your kernel" in theirs.message and "flashtutor bug" in theirs.message
    assert ours.kind == "syntax" and ours.file == str(student)
