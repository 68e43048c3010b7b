"""Replace a file's content in one rename, so a reader (or a file watcher) sees
either the old text or the new one, never half a file."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to a temp file beside ``path`` and rename it over ``path``,
    keeping ``path``'s permissions.  ``durable`` also fsyncs before the rename
    (the progress file: a crash must not leave an empty one)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".flashtutor-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if path.exists():
            shutil.copymode(path, temp)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
