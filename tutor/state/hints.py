"""Tiered hints: which of a drill's hints are open, and what opens the next.

The hints and their unlock rules are data (``[[hints]]`` in the drill's TOML,
read into :class:`tutor.catalog.Hint`).  A hint is open when

* it has neither rule (``open_from_start``: the first tier), or
* a check of the student's edit reported one of its ``unlock_codes`` (it opens
  at once, whether or not that check counted as an attempt: the same edit
  checked again opens what its codes key), or
* the drill has ``after_attempts`` attempts: checks of distinct content
  (:mod:`tutor.state.progress`; re-checking an unchanged file, or the drill as
  shipped, is no attempt).

The drill *as shipped* opens nothing, although its check reports codes: it is
no edit of the student's, and drills 04 and 06 ship with codes that key two or
three hints, which opening the drill would otherwise hand out unearned (issue
10: opening a drill with no edit must open no hint).  The rule's words say so
("a check of your edit").

Earned unlocks are stored in the progress file and never taken back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tutor.catalog import Drill, Hint


@dataclass(frozen=True)
class HintState:
    index: int  # position in Drill.hints; shown to people as index + 1
    hint: Hint
    unlocked: bool

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def unlock_rule(self) -> str:
        return unlock_rule(self.hint)


def code_unlocks(drill: Drill, codes: Iterable[str]) -> set[int]:
    """The hints (indices) keyed to any of the diagnosis ``codes`` a check reported."""
    reported = set(codes)
    return {index for index, hint in enumerate(drill.hints) if reported.intersection(hint.unlock_codes)}


def earned_unlocks(drill: Drill, attempts: int, codes: Iterable[str]) -> set[int]:
    """The hints (indices) that a drill with ``attempts`` distinct attempts, whose latest
    check reported ``codes``, has earned.  Open-from-start hints are not earned."""
    by_attempts = {index for index, hint in enumerate(drill.hints)
                   if hint.after_attempts is not None and attempts >= hint.after_attempts}
    return code_unlocks(drill, codes) | by_attempts


def hint_states(drill: Drill, earned: Iterable[int]) -> list[HintState]:
    """Every hint of ``drill``, open or not, given the stored earned unlocks."""
    opened = set(earned)
    return [
        HintState(index=index, hint=hint, unlocked=hint.open_from_start or index in opened)
        for index, hint in enumerate(drill.hints)
    ]


def unlock_rule(hint: Hint) -> str:
    """What opens ``hint``, in words: "after 2 attempts, or at once when a check of your edit
    reports todo2-open" (the drill as shipped opens nothing: see the module's words)."""
    if hint.open_from_start:
        return "open from the start"
    parts = []
    if hint.after_attempts is not None:
        parts.append(f"after {hint.after_attempts} attempt{'s' if hint.after_attempts != 1 else ''}")
    if hint.unlock_codes:
        codes = list(hint.unlock_codes)
        listed = codes[0] if len(codes) == 1 else ", ".join(codes[:-1]) + " or " + codes[-1]
        parts.append(f"at once when a check of your edit reports {listed}")
    return "opens " + ", or ".join(parts)


def next_locked(states: list[HintState]) -> HintState | None:
    """The first hint still locked (the next tier), if any."""
    return next((state for state in states if not state.unlocked), None)
