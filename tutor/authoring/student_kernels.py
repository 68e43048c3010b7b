"""Student-like kernels for a drill, as data: ``solutions/NN_slug.mistakes.toml``.

Each entry is the drill's solution (or the shipped drill) with a few textual
edits, and what a check of the result must say.  Wrong kernels name the
diagnosis codes they must produce; correct kernels written differently
(``passes = true``, no codes) must PASS with no finding.  The tests, and
``flashtutor dev check``, write them out with :func:`materialise` and run them
through the real harness, so a change to a base file flows into every entry
and an edit that no longer applies fails loudly.

Format::

    [[mistake]]
    name = "diagonal_unmasked"          # file stem: NN_<name>.py
    base = "solution"                   # or "drill": which shipped file the edits apply to
    says = "the diagonal mask is missing"   # the mistake, in words (first line of the file)
    codes = ["diagonal-unmasked"]       # every error- and finding-level code the check must report, in order
    passes = false                      # does the check PASS (within tolerance on every case)?
    slow = false                        # optional: only in the slow (interpreter) tier
    gpu_codes = ["..."]                 # optional: what a compiled GPU check must report where it
                                        # measures otherwise: the interpreter-only read traces (say
                                        # nothing there), GPU-only shapes ("error:compile": the kernel
                                        # does not compile at head_dim 128); [] = solved there;
                                        # "code?": said or not as the random inputs decide
                                        # (measured so on a GPU; say why beside it)
    [[mistake.edit]]
    find = '''        if CAUSAL:\n'''     # occurs exactly once in the base
    replace = ''''''
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from tutor.catalog import Drill, kernel_drills
from tutor.paths import content_root

SUFFIX = ".mistakes.toml"


class BadMistake(ValueError):
    """A mistake entry that does not apply to its base file."""


@dataclass(frozen=True)
class Edit:
    find: str
    replace: str


@dataclass(frozen=True)
class Mistake:
    drill: str  # drill id
    name: str
    base: str  # "solution" or "drill"
    says: str
    codes: tuple[str, ...]
    passes: bool
    edits: tuple[Edit, ...]
    slow: bool = False
    gpu_codes: tuple[str, ...] | None = None  # None: the same as ``codes``

    @property
    def stem(self) -> str:
        return f"{self.drill}_{self.name}"

    def expected(self, gpu: bool) -> str:
        """What a check must say, as one word for a report: "solved", "error:<kind>", or
        the codes joined by commas; on a GPU from ``gpu_codes`` where the entry has them."""
        codes = self.gpu_codes if gpu and self.gpu_codes is not None else self.codes
        return ",".join(codes) if codes else "solved"

    def base_path(self, drill: Drill, root: Path | None = None) -> Path:
        root = root or content_root()
        return root / ("solutions" if self.base == "solution" else "drills") / (
            drill.solution if self.base == "solution" else drill.file)

    def text(self, drill: Drill, root: Path | None = None) -> str:
        """The base file with the edits applied, headed by a line that says what it is."""
        base = self.base_path(drill, root)
        text = base.read_text(encoding="utf-8")
        for edit in self.edits:
            count = text.count(edit.find)
            if count != 1:
                raise BadMistake(f"{self.stem}: {edit.find!r} occurs {count} times in {base.name}, not once")
            text = text.replace(edit.find, edit.replace)
        rel = f"{base.parent.name}/{base.name}"
        kind = "correct, written differently" if self.passes and not self.codes else "one mistake"
        return f"# Test fixture: {rel} with {kind}: {self.says}.\n{text}"


def mistakes_path(drill: Drill, root: Path | None = None) -> Path:
    return (root or content_root()) / "solutions" / f"{drill.name}{SUFFIX}"


def load(drill: Drill, root: Path | None = None) -> list[Mistake]:
    path = mistakes_path(drill, root)
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    found = []
    for entry in data.get("mistake", ()):
        found.append(Mistake(
            drill=drill.id,
            name=entry["name"],
            base=entry.get("base", "solution"),
            says=" ".join(entry["says"].split()),
            codes=tuple(entry.get("codes", ())),
            passes=bool(entry.get("passes", False)),
            edits=tuple(Edit(e["find"], e["replace"]) for e in entry.get("edit", ())),
            slow=bool(entry.get("slow", False)),
            gpu_codes=tuple(entry["gpu_codes"]) if "gpu_codes" in entry else None,
        ))
    return found


def all_mistakes(root: Path | None = None) -> list[Mistake]:
    return [m for drill in kernel_drills() for m in load(drill, root)]


def materialise(dest: Path, root: Path | None = None) -> dict[str, Path]:
    """Write every drill's entries as ``dest/NN_name.py``; returns stem -> path."""
    from tutor.catalog import get_drill

    dest.mkdir(parents=True, exist_ok=True)
    written = {}
    for mistake in all_mistakes(root):
        path = dest / f"{mistake.stem}.py"
        path.write_text(mistake.text(get_drill(mistake.drill), root), encoding="utf-8")
        written[mistake.stem] = path
    return written
