"""One attention launch's case and visit map, shared by the attention problems
(forward, backward, sliding window): the comparison of a launch's output with
its reference, the blocks a query block must visit, and the launch modes."""

from __future__ import annotations

import torch

from tutor.catalog import Drill
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.result import CaseResult, VisitMap


def evaluate(name: str, causal: bool, run: launching.Launch, expected: torch.Tensor, tolerance: float,
             allowed: torch.Tensor | None = None) -> CaseResult:
    """Compare one launch's output with the reference; with ``allowed`` (a hostile case's)
    each element is held to its own allowance, its error reported in the tolerance's units."""
    measured = (shared.measure_output(run.out, expected) if allowed is None
                else shared.measure_within(run.out, expected, allowed, tolerance))
    worst_row = (int(measured.error.argmax()) // run.out.shape[-1]) % run.out.shape[-2]
    return shared.case_result(name, causal, list(run.out.shape), measured, tolerance, run.wrote_out_of_bounds,
                              worst_row)


def ideal_visits(seq: int, block_m: int, block_n: int, causal: bool) -> list[list[bool]]:
    """Which key blocks a query block must visit: for causal attention, those whose
    first key is not after the block's last existing row."""
    n_m, n_n = launching.visit_grid(seq, block_m, block_n)
    return [
        [not causal or j * block_n <= min((i + 1) * block_m, seq) - 1 for j in range(n_n)]
        for i in range(n_m)
    ]


def block_visit_map(visits: torch.Tensor, seq: int, block_m: int, block_n: int, ideal: list[list[bool]],
                    label: str = "") -> VisitMap:
    """A recorded (batch*heads, row blocks, column blocks) visit tensor as a map: each
    cell counts the programs (heads) that visited it; ``ideal`` is what they must."""
    return VisitMap(block_m=block_m, block_n=block_n, seq=seq, heads=visits.shape[0],
                    counts=(visits != 0).sum(dim=0).cpu().tolist(), ideal=ideal, label=label)


def visit_map(run: launching.Launch, seq: int, block_m: int, block_n: int, causal: bool) -> VisitMap:
    assert run.visits is not None
    return block_visit_map(run.visits, seq, block_m, block_n, ideal_visits(seq, block_m, block_n, causal))


def launch_modes(drill: Drill) -> list[bool | None]:
    """The ``causal`` argument of each launch; None: the launcher takes none."""
    if "causal" not in drill.modes:
        return [None]
    return [mode == "causal" for mode in drill.modes]


def mode_words(drill: Drill, causal: bool | None) -> str:
    if "full" in drill.modes and "causal" in drill.modes:
        return ", causal" if causal else ", full"
    return ""
