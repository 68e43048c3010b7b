"""Import a student's drill file as a fresh module (in the worker process)."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from tutor.harness import errors
from tutor.harness.errors import LauncherMismatch
from tutor.harness.result import CheckError

LAUNCHER = "attention"
# The tile sizes the tutor reads from a kernel drill's module: it counts the visit map
# (which query block x key block tiles the kernel visited) in tiles of this size.
TILE_CONSTANTS = ("BLOCK_M", "BLOCK_N")


class MissingTileSize(AttributeError):
    """A tile size the tutor reads (``module.BLOCK_M``) that the student's file does
    not define at module level; an AttributeError, so ``getattr(module, name, default)``
    still falls back.  The message says what to add, where, and why."""


def _tile_size_getattr(file: str, missing: tuple[str, ...]) -> Callable[[str], object]:
    names = " and ".join(missing)
    lines = "; ".join(f"`{name} = 64`" for name in missing)

    def __getattr__(name: str) -> object:
        if name in missing:
            raise MissingTileSize(
                f"{Path(file).name} defines no module-level {names}: the tutor reads the tile sizes your "
                f"launcher uses (query rows per program, keys per step) from the module, to count which "
                f"tiles your kernel visited (the visit map). Add {lines} at the top of the file, after "
                f"the imports, and launch the kernel with them (e.g. BLOCK_M=BLOCK_M in the launch)"
            )
        raise AttributeError(f"module {Path(file).stem!r} has no attribute {name!r}")

    return __getattr__


class LoadFailed(Exception):
    def __init__(self, error: CheckError):
        super().__init__(error.message)
        self.error = error


def load_student_module(path: Path, data: bytes | None = None) -> ModuleType:
    """Compile and execute ``path`` as a module named after the file (``data``: its
    bytes, already read by the caller; None: read them here).

    Raises :class:`LoadFailed` with the student's file and line for a syntax
    error, an exception at import time, or a module with no ``attention``.
    """
    file = str(path)
    try:
        if data is None:
            data = path.read_bytes()
    except FileNotFoundError:
        raise LoadFailed(CheckError(kind="missing-file", message=f"no such file: {file}", file=file)) from None
    except OSError as exc:
        raise LoadFailed(CheckError(kind="missing-file", message=f"cannot read {file}: {exc}", file=file)) from None
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadFailed(errors.not_utf8(exc, data, file)) from None
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
    missing = tuple(name for name in TILE_CONSTANTS if name not in module.__dict__)
    if missing and "__getattr__" not in module.__dict__:  # a kernel ported from elsewhere: say what to add
        module.__dict__["__getattr__"] = _tile_size_getattr(file, missing)
    if not callable(getattr(module, LAUNCHER, None)):
        raise LoadFailed(
            CheckError(
                kind="missing-function",
                message=f"{path.name} defines no {LAUNCHER}(q, k, v, ...) launcher for the tutor to call",
                file=file,
            )
        )
    return module


def expected_call(names: tuple[str, ...], keywords: Mapping[str, object]) -> str:
    """The launcher's ``def`` line the tutor's call fits:
    ``def attention(q, k, v, causal=False, out=None, visits=None)``."""
    flags = [f"{key}={value}" for key, value in keywords.items() if isinstance(value, bool)]  # causal=False
    buffers = [f"{key}=None" for key, value in keywords.items() if not isinstance(value, bool)]  # out=, visits=
    params = [*names, *(flag.replace("=True", "=False") for flag in flags), *buffers]
    return f"def {LAUNCHER}({', '.join(params)})"


def check_launcher_call(launcher: Callable[..., object], names: tuple[str, ...], args: tuple[object, ...],
                        keywords: Mapping[str, object]) -> None:
    """Raise :class:`LauncherMismatch` when ``launcher(*args, **keywords)`` cannot bind
    (a missing or misspelt parameter), before the call: Python's own TypeError for
    it names no line of the student's file."""
    try:
        signature = inspect.signature(launcher)
    except (TypeError, ValueError):  # not introspectable: let the call itself say
        return
    try:
        signature.bind(*args, **keywords)
    except TypeError as exc:
        raise LauncherMismatch(launcher, expected_call(names, keywords), str(exc)) from None
