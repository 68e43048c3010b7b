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
    # time torch's SDPA beside the student's kernel (GPU only); the runner asks for it
    # once per session: it does not change between saves
    time_sdpa: bool = True
    # replaces the device's default correctness shape (batch, heads, seq, head_dim),
    # the one whose visit map is reported; the ragged and short shapes still run
    shape: tuple[int, int, int, int] | None = None
    # run ``shape`` alone: no ragged, short or hostile case (the crash re-run, tutor.loop.runner)
    shape_only: bool = False

    def __post_init__(self) -> None:
        if self.shape is not None:  # a JSON list after crossing the process boundary
            shape = tuple(int(n) for n in self.shape)
            if len(shape) != 4 or min(shape) < 1:
                raise ValueError(f"shape must be four positive sizes (batch, heads, seq, head_dim), not {self.shape!r}")
            self.shape = (shape[0], shape[1], shape[2], shape[3])
