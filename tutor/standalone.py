"""What ``python drills/NN_*.py`` does: check that very file and print the report.

The drill's module was imported by a plain ``python`` (no interpreter switch
set), so the check itself runs in a worker process like every other check.
"""

from __future__ import annotations

import sys

from tutor.catalog import get_drill
from tutor.cli.check import exit_code
from tutor.loop.runner import CheckRunner
from tutor.report import render

SPEEDUP_REASONS = """\
Why the measured speed-up lands below the ideal {ideal:.2f}x:
  1. The diagonal blocks are visited whole and half masked: their masked half
     costs the same loads and dot products as useful work.
  2. Fixed per-program costs do not halve: loading the Q tile, the epilogue
     (normalise and store) and the launch itself are paid by every program,
     causal or not.
  3. Load imbalance: later query blocks visit more K/V blocks than early ones,
     so the last wave of programs is dominated by the heaviest blocks while
     the rest of the GPU idles (on one wave - a small shape - causal can be
     no faster than full at all)."""


def check_this_file(file: str, drill: str, explain_speedup: bool = False) -> None:
    meta = get_drill(drill)
    with CheckRunner(warm=False) as runner:
        result = runner.check(meta.id, file)
    print(render(result, title=f"{meta.id} {meta.title}"))
    visited, ideal = result.visited_fraction, result.ideal_fraction
    if explain_speedup and result.passed and result.visits is not None and visited is not None and ideal:
        v = result.visits
        print()
        print(
            f"visited fraction: exactly {v.visited_blocks}/{v.total_blocks} = {visited:.4f} "
            f"of the K/V blocks at seq={v.seq} with {v.block_m}x{v.block_n} blocks "
            f"(ideal {v.ideal_blocks}/{v.total_blocks})"
        )
        print(SPEEDUP_REASONS.format(ideal=1 / ideal))
    sys.exit(exit_code(result))
