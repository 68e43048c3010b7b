"""What one check is asked to do; light enough to import without torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckJob:
    """Crosses the process boundary as a plain dict (``dataclasses.asdict``)."""

    drill: str  # drill id
    file: str  # the student's file (absolute path)
    timing: bool = True  # False skips the timed launches (tests that only need the verdict)
    seed: int | None = None  # None: fresh inputs every run
