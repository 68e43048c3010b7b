"""What the app knows of the workspace's progress, kept without reading
``.flashtutor/progress.json`` on the UI thread.

The app reads the file in a thread worker (when it starts, when the list comes
back on screen, after the quiz stored an answer) and hands the copies it read
to :meth:`KnownProgress.take_load` on the UI thread.  In between, every check's
record arrives with the engine's events (``CheckFinished.record``,
``PerformanceFinished.record``) and replaces the drill's entry at once
(:meth:`KnownProgress.take_record`).  A load that lands after a newer event
keeps that event's record for its drill: the worker may have read the file
before the check was recorded.  Nothing here touches a file or Textual.
"""

from __future__ import annotations

from typing import Any

from tutor.catalog import all_drills
from tutor.state.progress import DrillProgress, DrillSummary, summarize


class KnownProgress:
    """Per drill, the newest progress the app has seen; and the quiz's answers."""

    def __init__(self) -> None:
        self.drills: dict[str, DrillProgress] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self._records = 0  # records taken from events so far
        self._record_number: dict[str, int] = {}  # drill id -> number of its latest record
        self.loaded = False  # a load of the file has landed (before it, a drill's absence says nothing)

    def drill(self, drill_id: str) -> DrillProgress:
        return self.drills.get(drill_id, DrillProgress())

    def rows(self) -> list[DrillSummary]:
        """The drill list's rows (:func:`tutor.state.progress.summarize`), every drill in catalog order."""
        return summarize(self.drills, self.answers, all_drills())

    def take_record(self, drill_id: str, record: DrillProgress) -> None:
        """A record an engine event carried: the newest there is for its drill."""
        self._records += 1
        self._record_number[drill_id] = self._records
        self.drills[drill_id] = record

    def load_mark(self) -> int:
        """Taken when a load starts, given back to :meth:`take_load`."""
        return self._records

    def take_load(self, drills: dict[str, DrillProgress], answers: dict[str, dict[str, Any]],
                  mark: int) -> set[str]:
        """The file as a worker read it, after :meth:`load_mark` gave ``mark``.
        Returns the drills whose progress changed."""
        newer = {key for key, number in self._record_number.items() if number > mark}
        merged = {**drills, **{key: self.drills[key] for key in newer if key in self.drills}}
        changed = {key for key in merged.keys() | self.drills.keys() if merged.get(key) != self.drills.get(key)}
        self.drills = merged
        self.answers = answers
        self.loaded = True
        return changed
