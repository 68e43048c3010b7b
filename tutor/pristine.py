"""The drills as shipped, whatever the student has done to their copies.

``init`` and ``reset`` must never hand out a file the student edited.  But the
place the content comes from can be one the student edits: in a clone, and in
an editable install (``pip install -e .``), the package's content root *is* the
clone's own ``drills/``.  So the shipped drills are pinned by a manifest,
``tutor/shipped_drills.json``: for every file ``init`` copies (``drills/*.py``,
``drills/*.md``), its git blob id (the SHA-1 git gives the file's bytes, so the
same id names the object in any clone).

To get a shipped file:

1. the content root's copy (``drills/<name>`` of a clone, ``tutor/_content``
   of a wheel) is used when its bytes hash to the manifest's id;
2. otherwise it was edited: the bytes are taken from git's object store,
   ``git cat-file blob <id>`` in the content root (a clone has every committed
   version, even after the student commits their own work), and checked again;
3. otherwise there is no shipped copy to give, and :class:`PristineError` says
   so rather than hand out an edited one.

Developers: after changing or adding a drill, regenerate the manifest with
``python -m tutor.pristine --write`` (a test fails, naming this command, while
it is stale).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from tutor.paths import PACKAGE_DIR, content_root

MANIFEST = PACKAGE_DIR / "shipped_drills.json"
WRITE_COMMAND = "python -m tutor.pristine --write"


class PristineError(Exception):
    """No copy of a shipped drill could be found that is not edited."""


def blob_id(data: bytes) -> str:
    """The id git gives a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_shipped_name(path: Path) -> bool:
    """The files of ``drills/`` that ``init`` copies into a workspace."""
    return path.suffix in (".py", ".md") and not path.name.startswith("_") and path.is_file()


def content_files(content: Path | None = None) -> list[Path]:
    drills = (content or content_root()) / "drills"
    return sorted(p for p in drills.iterdir() if is_shipped_name(p)) if drills.is_dir() else []


@lru_cache(maxsize=1)
def _manifest_at(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in data["files"].items()}
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise PristineError(f"the shipped-drill manifest {path} is missing or broken ({exc}): "
                            "reinstall flashtutor, or restore it from a fresh clone") from None


def manifest() -> dict[str, str]:
    """file name in drills/ -> git blob id of the shipped version."""
    return dict(_manifest_at(MANIFEST))


def shipped_names() -> list[str]:
    return sorted(manifest())


def _git_blob(content: Path, blob: str) -> bytes | None:
    try:
        shown = subprocess.run(["git", "cat-file", "blob", blob], cwd=content, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return shown.stdout if shown.returncode == 0 else None


def shipped_bytes(name: str, content: Path | None = None) -> tuple[bytes, str]:
    """The shipped bytes of ``drills/<name>`` and where they came from, in words."""
    content = content or content_root()
    expected = manifest().get(name)
    if expected is None:
        raise PristineError(f"drills/{name} is not a shipped drill file (not in {MANIFEST.name}; "
                            f"developers: `{WRITE_COMMAND}`)")
    copy = content / "drills" / name
    try:
        data = copy.read_bytes()
    except OSError:
        data = None
    if data is not None and blob_id(data) == expected:
        return data, f"the shipped copy {copy}"
    from_git = _git_blob(content, expected)
    if from_git is not None and blob_id(from_git) == expected:
        return from_git, f"git (the shipped version of drills/{name}, object {expected[:12]})"
    state = "is missing" if data is None else "has been edited"
    raise PristineError(
        f"cannot give the shipped drills/{name}: the copy at {copy} {state}, and git has no shipped "
        f"version of it (object {expected[:12]}). Reinstall flashtutor or take the file from a fresh clone."
    )


def shipped_text(name: str, content: Path | None = None) -> tuple[str, str]:
    data, source = shipped_bytes(name, content)
    return data.decode("utf-8"), source


_MATERIALISED: dict[str, Path] = {}


def shipped_path(name: str) -> Path:
    """A path holding the shipped ``drills/<name>``: the content root's own copy
    when it is unedited, else a copy written once to a temporary folder."""
    copy = content_root() / "drills" / name
    data, source = shipped_bytes(name)
    if source.startswith("the shipped copy"):
        return copy
    if name not in _MATERIALISED:
        folder = Path(tempfile.mkdtemp(prefix="flashtutor-shipped-"))
        (folder / name).write_bytes(data)
        _MATERIALISED[name] = folder / name
    return _MATERIALISED[name]


# -- the manifest itself (developers) -------------------------------------------


def committed_blobs(content: Path) -> dict[str, str] | None:
    """file name -> blob id of ``drills/`` as HEAD has it; None without git history."""
    try:
        listed = subprocess.run(["git", "ls-tree", "HEAD", "drills/"], cwd=content, capture_output=True,
                                text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    blobs = {}
    for line in listed.stdout.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            blobs[Path(path).name] = parts[2]
    return blobs


def stale_entries(content: Path | None = None) -> list[str]:
    """Why the manifest does not describe ``content``'s drills (empty: it does).

    A file may be shipped as the working tree has it (a developer changing a
    drill, not committed yet) or as HEAD has it (a student who edited their
    clone's drills: their edits are not the shipped text)."""
    content = content or content_root()
    pinned = manifest()
    committed = committed_blobs(content) or {}
    problems = []
    names = {p.name for p in content_files(content)}
    for name in sorted(names - pinned.keys()):
        problems.append(f"drills/{name} is not in the manifest")
    for name in sorted(pinned.keys() - names):
        problems.append(f"the manifest lists drills/{name}, which is not in drills/")
    for name in sorted(names & pinned.keys()):
        here = blob_id((content / "drills" / name).read_bytes())
        if pinned[name] not in (here, committed.get(name)):
            problems.append(f"drills/{name} is neither the manifest's version nor HEAD's")
    return problems


def manifest_text(files: dict[str, str]) -> str:
    """The manifest file's text pinning ``files`` (name -> blob id)."""
    return json.dumps({"about": "git blob ids of the shipped drills; regenerate with: " + WRITE_COMMAND,
                       "files": files}, indent=1, sort_keys=True) + "\n"


def write_manifest(content: Path | None = None, path: Path = MANIFEST) -> dict[str, str]:
    """Pin ``content``'s drills as they are in the working tree."""
    files = {p.name: blob_id(p.read_bytes()) for p in content_files(content)}
    path.write_text(manifest_text(files), encoding="utf-8")
    _manifest_at.cache_clear()
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutor.pristine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="pin drills/ as the working tree has it")
    args = parser.parse_args(argv)
    if args.write:
        for name, blob in write_manifest().items():
            print(f"{blob}  drills/{name}")
        print(f"wrote {MANIFEST}")
        return 0
    problems = stale_entries()
    for problem in problems:
        print(problem)
    print("the manifest is stale: " + WRITE_COMMAND if problems else "the manifest matches drills/")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
