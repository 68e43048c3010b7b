"""Turn what went wrong inside a student's file into a :class:`CheckError` that
points at *their* line: syntax errors, exceptions raised in their launcher,
Triton compile errors (whose line numbers count from the ``def`` of the jit
function) and interpreter errors (whose real exception is the ``__cause__``).
"""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path
from types import ModuleType
from typing import Literal

from tutor.harness.device import interpreting
from tutor.harness.interpreter_bounds import OutOfBounds
from tutor.harness.interpreter_races import StoreRace
from tutor.harness.result import CheckError, ErrorKind


def _source_line(file: str, line: int | None) -> str | None:
    if not line:
        return None
    text = linecache.getline(file, line).rstrip()
    return text or None


def _libdevice_line(file: str) -> int | None:
    """The first line of ``file`` that calls a ``libdevice.`` function (not an import), if any."""
    for number, text in enumerate(linecache.getlines(file), 1):
        code = text.split("#", 1)[0]
        if "libdevice." in code and "import" not in code:
            return number
    return None


def _short(exc: BaseException) -> str:
    message = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {message}" if str(exc).strip() else message


def syntax_error(exc: SyntaxError, file: str) -> CheckError:
    return CheckError(
        kind="syntax",
        message=f"SyntaxError: {exc.msg}",
        file=file,
        line=exc.lineno,
        source_line=(exc.text or "").rstrip() or _source_line(file, exc.lineno),
    )


def _in_tutor(filename: str) -> bool:
    """Is ``filename`` one of the tutor's own source files?"""
    return Path(filename).resolve().is_relative_to(Path(__file__).resolve().parents[1])


def tutor_syntax_error(exc: SyntaxError) -> CheckError:
    """One of the tutor's own modules does not parse (imported while the check ran): not the
    student's kernel (blind round 27: a tutor file being edited was reported as the kernel's
    syntax error)."""
    assert exc.filename is not None
    return CheckError(
        kind="internal",
        message=f"the tutor's own source does not parse (SyntaxError: {exc.msg}), not your kernel: a flashtutor bug,"
                " or its source being edited while this check ran. Save again to re-run the check; report it if it"
                " stays.",
        file=exc.filename,
        line=exc.lineno,
        source_line=(exc.text or "").rstrip() or _source_line(exc.filename, exc.lineno),
    )


def not_utf8(exc: UnicodeDecodeError, data: bytes, file: str) -> CheckError:
    """The file's bytes are not UTF-8 text: say where, by line, not by byte offset."""
    line = data.count(b"\n", 0, exc.start) + 1
    bad = data[exc.start:exc.end]
    shown = data.split(b"\n")[line - 1].decode("utf-8", errors="replace").rstrip()
    return CheckError(
        kind="syntax",
        message=f"not UTF-8 text (line {line}): byte{'s' if len(bad) > 1 else ''} {bad.hex(' ')} cannot be read; "
                "save the file as UTF-8",
        file=file,
        line=line,
        source_line=shown or None,
    )


class LauncherMismatch(TypeError):
    """The launcher's parameters do not take the call the tutor makes
    (raised by :func:`tutor.harness.loader.check_launcher_call`)."""

    def __init__(self, launcher: object, expected: str, reason: str):
        super().__init__(reason)
        self.launcher = launcher
        self.expected = expected
        self.reason = reason


def launcher_mismatch(exc: LauncherMismatch, file: str) -> CheckError:
    """The launcher's ``def`` does not take the tutor's call: point at the ``def``."""
    code = getattr(exc.launcher, "__code__", None)
    here = code is not None and Path(code.co_filename).resolve() == Path(file).resolve()
    line = code.co_firstlineno if here and code is not None else None
    return CheckError(
        kind="missing-function",
        message=f"the launcher's signature does not take the tutor's call ({exc.reason}); "
                f"expected: {exc.expected}",
        file=file,
        line=line,
        source_line=_source_line(file, line),
    )


def bad_output_error(message: str, file: str, launcher: object) -> CheckError:
    """The launcher returned the wrong thing: point at the launcher itself."""
    code = getattr(launcher, "__code__", None)
    here = code is not None and Path(code.co_filename).resolve() == Path(file).resolve()
    line = code.co_firstlineno if here and code is not None else None
    return CheckError(kind="bad-output", message=message, file=file, line=line, source_line=_source_line(file, line))


def store_race_error(race: StoreRace, file: str) -> CheckError:
    """A kernel whose output came out right only through the interpreter's program order:
    the race, at the line of the store that found it."""
    target = Path(file).resolve()
    frames = [f for f in race.frames if Path(f.filename).resolve() == target]
    line = frames[-1].lineno if frames else None
    return CheckError(kind="runtime", message=f"store race, output right only by the interpreter's order: {race}",
                      file=file, line=line, source_line=_source_line(file, line),
                      detail="".join(traceback.format_list(frames[-3:])) if frames else None)


def _compile_error_line(exc: BaseException, module: ModuleType | None) -> int | None:
    """Map a Triton CompilationError to a line of the student's file.

    Its ``node.lineno`` counts from the jit function's ``def`` line; find the jit
    function whose source the error quotes and add its def line.
    """
    node_line = getattr(getattr(exc, "node", None), "lineno", None)
    src = getattr(exc, "src", None)
    if node_line is None or module is None:
        return None
    for value in vars(module).values():
        fn_src = getattr(value, "src", None)
        def_line = getattr(value, "def_file_line_number", None) or getattr(value, "starting_line_number", None)
        if fn_src is not None and def_line is not None and (src is None or fn_src == src):
            return int(def_line + node_line - 1)
    return None


def _unwrap(exc: BaseException) -> BaseException:
    """Triton's interpreter wraps the real exception: ``InterpreterError(repr(e))``."""
    while type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    chain = [exc]
    while chain[-1].__cause__ is not None and chain[-1].__cause__ not in chain:
        chain.append(chain[-1].__cause__)
    return chain


def _student_frames(exc: BaseException, file: str) -> list[traceback.FrameSummary]:
    """The frames in ``file``, outermost first, over the whole chain: under the
    interpreter each nesting level of ``InterpreterError`` holds part of the stack
    (the launcher's call in the outer one, the kernel's line in an inner one)."""
    target = Path(file).resolve()
    return [
        frame
        for link in _chain(exc)
        for frame in traceback.extract_tb(link.__traceback__)
        if Path(frame.filename).resolve() == target
    ]


def _jit_function_names(module: ModuleType | None) -> set[str]:
    """Names of the module's ``@triton.jit`` functions (a JITFunction on a GPU, an
    InterpretedFunction under the interpreter; both keep the Python one as ``.fn``)."""
    if module is None:
        return set()
    return {
        value.fn.__name__
        for value in vars(module).values()
        if type(value).__name__ in ("JITFunction", "InterpretedFunction") and callable(getattr(value, "fn", None))
    }


def from_exception(exc: BaseException, file: str, module: ModuleType | None,
                   during: Literal["import", "runtime"]) -> CheckError:
    """A CheckError for an exception raised while importing (``during="import"``)
    or running (``during="runtime"``) the student's code.

    An exception raised while Triton's interpreter runs the body of a jit
    function is what a GPU reports as a compile error (an arange that is not a
    power of two, a reduction over a missing axis, an undefined name: the
    compiler rejects the kernel before it runs), so it is reported as one.
    """
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == Path(file).resolve():
        return syntax_error(exc, file)
    if isinstance(exc, SyntaxError) and exc.filename and _in_tutor(exc.filename):
        return tutor_syntax_error(exc)
    if isinstance(exc, LauncherMismatch):
        return launcher_mismatch(exc, file)
    if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct"):
        line = _compile_error_line(exc, module)
        detail = str(exc)
        reason = getattr(exc, "error_message", None) or detail.splitlines()[-1]
        return CheckError(
            kind="compile",
            message=f"Triton could not compile the kernel: {reason}".strip(),
            file=file,
            line=line,
            source_line=_source_line(file, line),
            detail=detail,
        )
    real = _unwrap(exc)
    frames = _student_frames(exc, file)
    line = frames[-1].lineno if frames else None
    trace = "".join(traceback.format_list(frames[-3:])) if frames else None
    message = _short(real)
    kind: ErrorKind = during
    jit_names = _jit_function_names(module)
    placeholder = _libdevice_line(file) if frames and frames[-1].name in jit_names and interpreting() else None
    if placeholder is not None:
        line, trace = placeholder, None
        message = ("Triton's CPU interpreter cannot run libdevice functions: they are placeholders "
                   "the GPU compiler fills in, and the interpreter calls the empty placeholder, which returns None "
                   f"({message}). On a GPU they are fine; here use the triton.language function "
                   "(tl.exp2, tl.exp, tl.log2, tl.sqrt, tl.rsqrt, tl.maximum ...)")
    elif "Block pointers have been removed" in message:
        import triton

        kind = "compile"
        message = (f"the installed Triton ({triton.__version__}) has no block pointers (tl.make_block_ptr was removed "
                   "in favour of tensor descriptors, tl.make_tensor_descriptor): write the loads with pointer "
                   f"offsets and masks, or with a tensor descriptor ({message})")
    elif isinstance(real, OutOfBounds):
        message = f"out-of-bounds access: {real}"  # a runtime fault the interpreter caught, not a compile error
    elif frames and frames[-1].name in jit_names:
        kind = "compile"
        message = f"Triton rejected the kernel (on a GPU this is a compile error): {message}"
    if "CUDA error" in message or "HIP error" in message:
        message += " (the GPU context is now unusable: the tutor starts a fresh worker for the next check)"
    return CheckError(
        kind=kind,
        message=message,
        file=file,
        line=line,
        source_line=_source_line(file, line),
        detail=trace,
    )


ILLEGAL_ADDRESS = ("illegal memory access", "illegal address", "misaligned address")


GPU_RUNTIME_ERRORS = ("CUDA error", "device-side assert", "CUDA_ERROR", *ILLEGAL_ADDRESS)


def tutor_fault(exc: BaseException, file: str) -> str | None:
    """Where the tutor's own diagnosis code raised ``exc``, when no launch of the student's
    kernel did: no frame of the chain lies in the student's ``file`` or in Triton (which
    compiles and launches their kernel), and the message is no CUDA error (those surface
    asynchronously, at whatever line synchronises next).  "path:line in function" of the
    innermost frame in the tutor's package; None where the kernel may be the cause."""
    if any(words in str(link) for link in _chain(exc) for words in GPU_RUNTIME_ERRORS):
        return None
    package = Path(__file__).resolve().parents[1]
    frames = [frame for link in _chain(exc) for frame in traceback.extract_tb(link.__traceback__)]
    student = Path(file).resolve()
    if any(Path(f.filename).resolve() == student or "triton" in Path(f.filename).parts for f in frames):
        return None
    own = [f for f in frames if Path(f.filename).resolve().is_relative_to(package)]
    if not own:
        return None
    last = own[-1]
    return f"{Path(last.filename).resolve().relative_to(package.parent)}:{last.lineno} in {last.name}"


def readout_failure_reason(error: CheckError, tutor_line: str | None = None) -> str:
    """Why the diagnosis phase stopped, when one of its launches of the student's kernel raised
    (or, ``tutor_line`` given, the tutor's own code there: :func:`tutor_fault`).

    A GPU stops a kernel with an illegal address only where the kernel itself reads or writes
    outside mapped memory, so that is said plainly: the correctness launches of the same kernel
    finished, so their stray accesses (if the same) landed in memory that happened to be mapped."""
    if tutor_line is not None:
        return (f"the tutor's own read-out code failed, not your kernel: {error.message} (at {tutor_line}). "
                "That is a flashtutor bug; please report it with this line. The verdict stands; no mistake is named.")
    # a probe names itself before its launch; one that does not leaves the last one named
    said = [error.location()] + ([f"the last step the diagnosis named: {error.during}"] if error.during else [])
    where = f" ({'; '.join(w for w in said if w)})" if any(said) else ""
    if any(words in error.message for words in ILLEGAL_ADDRESS):
        return ("a diagnosis launch of your kernel stopped with an illegal memory access: the kernel read or "
                "wrote an address outside the memory it was given (a GPU stops a kernel for nothing else). Its "
                "correctness launches finished, so the same stray offsets can land in memory that happens to be "
                "mapped there: look at the offsets of your loads and stores, and at their masks. The verdict "
                f"stands; no mistake is named{where}. ({error.message})")
    return f"a read-out launch raised: {error.message}{where}"
