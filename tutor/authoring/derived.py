"""What is derived from the catalog, written by ``flashtutor dev sync``.

Three things repeat what the drills' TOML files say, and would go stale by hand
when a drill is added or changed:

* README.md's drill table (id, file, ``summary``, ``competency``);
* drills/README.md's table (file, ``shipped_summary``) and its line of
  competencies;
* the pristine manifest (``tutor/shipped_drills.json``: the blob id of every
  file ``init`` copies, drills/README.md among them, so it is written last).

Each table lives between two marker lines, so the prose around it stays hand
written.  :func:`stale` says what differs (``dev check`` reports it);
:func:`sync` writes it.  The manifest belongs to the package: it is written only
for the content root the package ships (its own clone), never for another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tutor import pristine
from tutor.catalog import Drill, drill_tomls, read_drill
from tutor.paths import PACKAGE_DIR

SYNC_COMMAND = "flashtutor dev sync"
BEGIN = "<!-- drills table: written by `flashtutor dev sync` from drills/NN_slug.toml; edit those, not this -->"
END = "<!-- end of the drills table -->"


@dataclass(frozen=True)
class Derived:
    """One derived file: where it is and what it should hold."""

    path: Path
    text: str

    def is_stale(self) -> bool:
        return not self.path.is_file() or self.path.read_text(encoding="utf-8") != self.text


class MissingMarkers(ValueError):
    """A README without the marker lines the generated table goes between."""


def _drills(root: Path) -> list[Drill]:
    return [read_drill(p) for p in drill_tomls(root)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "(no summary yet: write it in the drill's TOML)"


def readme_table(drills: list[Drill]) -> str:
    rows = ["| # | file | what you do | skill |", "|---|---|---|---|"]
    rows += [f"| {d.id} | `drills/{d.file}` | {_cell(d.summary)} | {_cell(d.competency)} |" for d in drills]
    return "\n".join(rows)


def drills_readme_table(drills: list[Drill]) -> str:
    rows = ["| # | file | what it teaches |", "|---|---|---|"]
    rows += [f"| {d.id} | `{d.file}` | {_cell(d.shipped_summary)} |" for d in drills]
    skills = "; ".join(f"{d.competency} ({d.id})" for d in drills)
    return "\n".join(rows) + f"\n\nThey map to interview competencies: {skills}."


def _between_markers(path: Path, table: str) -> str:
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise MissingMarkers(f"{path}: the lines {BEGIN!r} and {END!r} mark where the drills table goes")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n\n{table}\n\n{END}{tail}"


def owns_manifest(root: Path) -> bool:
    """Whether ``root`` is the content the package's manifest pins (its own clone)."""
    return root.resolve() == PACKAGE_DIR.parent.resolve()


def derived_files(root: Path) -> list[Derived]:
    """Every file derived from the catalog under ``root``, as it should be now (the
    manifest computed over the tables as they should be)."""
    drills = _drills(root)
    tables = [Derived(path, _between_markers(path, render(drills)))
              for path, render in ((root / "README.md", readme_table),
                                   (root / "drills" / "README.md", drills_readme_table))
              if path.is_file()]  # an installed wheel's content has no top-level README
    if owns_manifest(root):
        blobs = {p.name: pristine.blob_id(p.read_bytes()) for p in pristine.content_files(root)}
        for table in tables:  # a table about to change changes its file's blob
            if table.path.parent == root / "drills":
                blobs[table.path.name] = pristine.blob_id(table.text.encode("utf-8"))
        tables.append(Derived(pristine.MANIFEST, pristine.manifest_text(blobs)))
    return tables


def stale(root: Path) -> list[Path]:
    """The derived files under ``root`` that differ from what the catalog says."""
    return [d.path for d in derived_files(root) if d.is_stale()]


def sync(root: Path) -> list[Path]:
    """Write every stale derived file; returns those written."""
    written = []
    for derived in derived_files(root):
        if derived.is_stale():
            derived.path.write_text(derived.text, encoding="utf-8")
            written.append(derived.path)
    return written
