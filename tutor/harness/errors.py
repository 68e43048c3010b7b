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

from tutor.harness.result import CheckError


def _source_line(file: str, line: int | None) -> str | None:
    if not line:
        return None
    text = linecache.getline(file, line).rstrip()
    return text or None


def _short(exc: BaseException) -> str:
    message = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {message}" if str(exc).strip() else message


def _last_frame_in(exc: BaseException, file: str) -> int | None:
    """The line of the innermost traceback frame that is in ``file``."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == Path(file).resolve():
            line = frame.lineno
    return line


def syntax_error(exc: SyntaxError, file: str) -> CheckError:
    return CheckError(
        kind="syntax",
        message=f"SyntaxError: {exc.msg}",
        file=file,
        line=exc.lineno,
        source_line=(exc.text or "").rstrip() or _source_line(file, exc.lineno),
    )


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
            return def_line + node_line - 1
    return None


def _unwrap(exc: BaseException) -> BaseException:
    """Triton's interpreter wraps the real exception: ``InterpreterError(repr(e))``."""
    while type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def from_exception(exc: BaseException, file: str, module: ModuleType | None, during: str) -> CheckError:
    """A CheckError for an exception raised while importing (``during="import"``)
    or running (``during="runtime"``) the student's code."""
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == Path(file).resolve():
        return syntax_error(exc, file)
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
    line = _last_frame_in(real, file) or _last_frame_in(exc, file)
    frames = [f for f in traceback.extract_tb(real.__traceback__) if Path(f.filename).resolve() == Path(file).resolve()]
    detail = "".join(traceback.format_list(frames[-3:])) if frames else None
    message = _short(real)
    if "CUDA error" in message or "HIP error" in message:
        message += " (the GPU context is now unusable: the tutor starts a fresh worker for the next check)"
    return CheckError(
        kind=during,
        message=message,
        file=file,
        line=line,
        source_line=_source_line(file, line),
        detail=detail,
    )
