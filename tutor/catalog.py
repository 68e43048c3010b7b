"""The drill catalog: what each drill is, read from the TOML file beside it.

Every drill ``drills/NN_name.<py|md>`` has ``drills/NN_name.toml`` with its
title, what it teaches, the tolerance, its hints (each naming the diagnosis
code or attempt count that unlocks it) and the words for each diagnosis code.
Code decides *which* diagnosis applies; the TOML says it in words.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal, get_args

from tutor.paths import content_root

DrillKind = Literal["kernel", "paper"]
"""A drill is a Triton file the harness runs ("kernel") or a quiz asked on paper ("paper")."""
DRILL_KINDS: tuple[DrillKind, ...] = get_args(DrillKind)

Severity = Literal["error", "finding", "info"]
"""How much a diagnosis weighs: why a check FAILED, PASSED but not done, or a remark."""
SEVERITIES: tuple[Severity, ...] = get_args(Severity)


class UnknownDrill(LookupError):
    """Raised for a drill id or name that is not in the catalog."""


@dataclass(frozen=True)
class Hint:
    """One tiered hint. ``unlock_codes`` open it as soon as a check reports one of
    those diagnosis codes; ``after_attempts`` opens it after that many checks;
    a hint with neither is open from the start."""

    title: str
    text: str
    unlock_codes: tuple[str, ...] = ()
    after_attempts: int | None = None

    @property
    def open_from_start(self) -> bool:
        return not self.unlock_codes and self.after_attempts is None


@dataclass(frozen=True)
class DiagnosisText:
    severity: Severity  # "error" (why it FAILED), "finding" (PASSED, but not done), "info"
    message: str


@dataclass(frozen=True)
class Shipped:
    """What a check of the drill file as shipped must say (the ``[shipped]`` table):
    whether it PASSES, and the diagnosis codes it reports, in order (info-level
    codes may be listed or left out; every error and finding must be listed)."""

    passes: bool
    codes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drill:
    id: str
    slug: str
    title: str
    # parsed as written: `flashtutor dev check` reports a kind outside DRILL_KINDS with its line
    kind: DrillKind
    file: str  # file name inside drills/
    solution: str  # file name inside solutions/
    teaches: str
    competency: str
    tolerance: float
    modes: tuple[str, ...]  # launches the harness checks: "full", "causal"
    hints: tuple[Hint, ...]
    diagnoses: dict[str, DiagnosisText] = field(default_factory=dict)
    # what a kernel drill computes: a module of tutor.harness.problems ("attention", ...)
    problem: str = "attention"
    # what the shipped file must say when checked (kernel drills; ``flashtutor dev check``)
    shipped: Shipped | None = None
    # one line each for the generated drill tables (tutor/authoring/derived.py):
    # README.md's "what you do", and drills/README.md's "what the file is, as shipped"
    summary: str = ""
    shipped_summary: str = ""

    @property
    def name(self) -> str:
        return f"{self.id}_{self.slug}"

    @property
    def is_kernel(self) -> bool:
        """A Triton file the harness checks (the other kind, "paper", is a quiz)."""
        return self.kind == "kernel"

    def diagnosis_text(self, code: str) -> DiagnosisText:
        try:
            return self.diagnoses[code]
        except KeyError:
            raise KeyError(f"drill {self.id} has no words for diagnosis code {code!r}") from None


def read_drill(path: Path) -> Drill:
    """Parse one drill's TOML (raises ``tomllib.TOMLDecodeError``, ``KeyError`` for a
    missing required key, ``TypeError``/``ValueError`` for a value of the wrong kind)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    shipped = None
    if "shipped" in data:
        table = data["shipped"]
        if not isinstance(table.get("passes"), bool):
            raise ValueError(f"{path.name}: [shipped] needs passes = true or false")
        shipped = Shipped(passes=table["passes"], codes=tuple(table.get("codes", ())))
    hints = tuple(
        Hint(
            title=h["title"],
            text=h["text"].strip(),
            unlock_codes=tuple(h.get("unlock_codes", ())),
            after_attempts=h.get("after_attempts"),
        )
        for h in data.get("hints", ())
    )
    diagnoses = {
        code: DiagnosisText(severity=d["severity"], message=" ".join(d["message"].split()))
        for code, d in data.get("diagnoses", {}).items()
    }
    return Drill(
        id=data["id"],
        slug=data["slug"],
        title=data["title"],
        kind=data["kind"],
        file=data["file"],
        solution=data["solution"],
        teaches=" ".join(data["teaches"].split()),
        competency=data["competency"],
        tolerance=float(data.get("tolerance", 0.0)),
        modes=tuple(data.get("modes", ())),
        hints=hints,
        diagnoses=diagnoses,
        problem=data.get("problem", "attention"),
        shipped=shipped,
        summary=" ".join(data.get("summary", "").split()),
        shipped_summary=" ".join(data.get("shipped_summary", "").split()),
    )


def drill_tomls(root: Path) -> list[Path]:
    """Every drill's TOML under ``root``, in id order: one ``drills/NN_name.toml`` per
    drill (other data beside it has a longer suffix, ``NN_name.quiz.toml``)."""
    return sorted(p for p in (root / "drills").glob("[0-9][0-9]_*.toml") if p.suffixes == [".toml"])


@cache
def _load(root: Path) -> tuple[Drill, ...]:
    drills = tuple(read_drill(p) for p in drill_tomls(root))
    if not drills:
        raise FileNotFoundError(f"no drill metadata (*.toml) under {root / 'drills'}")
    return drills


def all_drills() -> tuple[Drill, ...]:
    """Every drill, in order."""
    return _load(content_root())


def kernel_drills() -> tuple[Drill, ...]:
    """The kernel drills (the ones the harness checks), in order."""
    return tuple(d for d in all_drills() if d.is_kernel)


def next_drill(after_id: str | None, *, kind: DrillKind | None = None) -> Drill | None:
    """The drill after ``after_id`` in catalog order, or None after the last one.

    ``after_id`` None (nothing open yet) gives the first drill.  With ``kind`` the
    drills of other kinds are skipped: ``kind="kernel"`` is the next drill the
    harness can check.  An id the catalog does not know raises UnknownDrill.
    """
    drills = all_drills()
    if after_id is None:
        later = drills
    else:
        index = next((i for i, d in enumerate(drills) if d.id == after_id), None)
        if index is None:
            raise UnknownDrill(f"unknown drill id {after_id!r}")
        later = drills[index + 1:]
    return next((d for d in later if kind is None or d.kind == kind), None)


def get_drill(key: str) -> Drill:
    """Look a drill up by id (``01``, ``1``), slug, name, or a file name such as
    ``01_causal_mask.py`` / ``01_causal_mask_solution.py``."""
    text = Path(key).name.lower()
    for suffix in (".py", ".md"):
        text = text.removesuffix(suffix)
    text = text.removesuffix("_solution")
    for drill in all_drills():
        if text in (drill.id, drill.id.lstrip("0"), drill.slug, drill.name):
            return drill
    known = ", ".join(f"{d.id} ({d.slug})" for d in all_drills())
    raise UnknownDrill(f"unknown drill {key!r}; the drills are: {known}")


def pristine_path(drill: Drill) -> Path:
    """A file holding the drill as shipped, never an edited copy (see :mod:`tutor.pristine`)."""
    from tutor.pristine import shipped_path

    return shipped_path(drill.file)


def solution_path(drill: Drill) -> Path:
    return content_root() / "solutions" / drill.solution
