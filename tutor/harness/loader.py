"""Import a student's drill file as a fresh module (in the worker process)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tutor.harness import errors
from tutor.harness.result import CheckError

LAUNCHER = "attention"


class LoadFailed(Exception):
    def __init__(self, error: CheckError):
        super().__init__(error.message)
        self.error = error


def load_student_module(path: Path) -> ModuleType:
    """Compile and execute ``path`` as a module named after the file.

    Raises :class:`LoadFailed` with the student's file and line for a syntax
    error, an exception at import time, or a module with no ``attention``.
    """
    file = str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoadFailed(CheckError(kind="missing-file", message=f"no such file: {file}", file=file)) from None
    except OSError as exc:
        raise LoadFailed(CheckError(kind="missing-file", message=f"cannot read {file}: {exc}", file=file)) from None
    try:
        code = compile(source, file, "exec")
    except SyntaxError as exc:
        raise LoadFailed(errors.syntax_error(exc, file)) from None

    name = f"flashtutor_student_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton's jit looks its globals up through the module
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # noqa: BLE001 - anything the student's file raises is their error to see
        raise LoadFailed(errors.from_exception(exc, file, module, during="import")) from None
    if not callable(getattr(module, LAUNCHER, None)):
        raise LoadFailed(
            CheckError(
                kind="missing-function",
                message=f"{path.name} defines no {LAUNCHER}(q, k, v, ...) launcher for the tutor to call",
                file=file,
            )
        )
    return module
