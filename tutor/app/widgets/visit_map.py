"""The visited-block map: which (query block, key block) tiles the kernel loaded.

Rows are query blocks, columns key blocks.  Every cell is one of four kinds,
told apart by its glyph as well as its colour (so it reads under ``NO_COLOR``):

====================  =====  ============================================
kind                  glyph  meaning
====================  =====  ============================================
``visited``           ``██``  needed by a causal kernel and visited
``skipped``           ``··``  wholly in the future and (rightly) skipped
``extra``             ``xx``  visited although no query row of it needs it
``missing``           ``!!``  needed but not visited by every head
====================  =====  ============================================

A correct causal kernel draws a lower triangle of ``██`` over ``··``.
"""

from __future__ import annotations

import textwrap
from enum import Enum

from rich.text import Text
from textual.widgets import Static

from tutor.harness.result import VisitMap


class Cell(str, Enum):  # noqa: UP042 - not StrEnum: its str() would change how cells print
    VISITED = "visited"
    SKIPPED = "skipped"
    EXTRA = "extra"
    MISSING = "missing"


GLYPHS: dict[Cell, str] = {
    Cell.VISITED: "██",
    Cell.SKIPPED: "··",
    Cell.EXTRA: "xx",
    Cell.MISSING: "!!",
}

LEGEND: dict[Cell, str] = {
    Cell.VISITED: "needed, visited",
    Cell.SKIPPED: "future, skipped",
    Cell.EXTRA: "future, visited",
    Cell.MISSING: "needed, missed",
}

# Rich styles; the monochrome filter Textual applies under NO_COLOR drops the
# colours and the glyphs still tell the kinds apart.
STYLES: dict[Cell, str] = {
    Cell.VISITED: "green",
    Cell.SKIPPED: "bright_black",
    Cell.EXTRA: "bold yellow",
    Cell.MISSING: "bold red",
}


def classify(visits: VisitMap) -> list[list[Cell]]:
    """The kind of every cell.  ``counts[i][j]`` sums over the ``heads`` programs
    of query block i, so a needed block counts as visited only if every head
    visited it."""
    grid: list[list[Cell]] = []
    for count_row, ideal_row in zip(visits.counts, visits.ideal, strict=True):
        row = []
        for count, needed in zip(count_row, ideal_row, strict=True):
            if needed:
                row.append(Cell.VISITED if count >= visits.heads else Cell.MISSING)
            else:
                row.append(Cell.EXTRA if count > 0 else Cell.SKIPPED)
        grid.append(row)
    return grid


def tally(grid: list[list[Cell]]) -> dict[Cell, int]:
    counts = {cell: 0 for cell in Cell}
    for row in grid:
        for cell in row:
            counts[cell] += 1
    return counts


def _axis_labels(n: int, cell_width: int) -> str:
    """Key-block numbers above the columns, every fourth one for wide maps."""
    step = 1 if n <= 8 else 4
    line = ""
    for j in range(0, n, step):
        label = str(j)
        line += label.ljust(cell_width * step)
    return line.rstrip()


def render_map(visits: VisitMap) -> Text:
    """The map as styled text: key-block axis on top, query-block axis on the left,
    and a legend of every kind with its number of cells underneath."""
    grid = classify(visits)
    n_rows, n_cols = len(grid), len(grid[0]) if grid else 0
    gap = " " if n_cols <= 8 else ""
    cell_width = 2 + len(gap)
    label_width = len(str(n_rows - 1))
    text = Text()
    legend_title = f"cells per head (x {visits.heads} heads in total):"
    if visits.label:  # what the map is of (one sequence of several, a window, ...), no wider than map or legend
        width = max(label_width + 2 + n_cols * cell_width, len(legend_title))
        text.append("\n".join(textwrap.wrap(visits.label, width)) + "\n", style="dim")
    text.append(" " * (label_width + 2) + "key block →\n", style="dim")
    text.append("q".rjust(label_width) + "  " + _axis_labels(n_cols, cell_width) + "\n", style="dim")
    for i, row in enumerate(grid):
        text.append(f"{i:>{label_width}}  ", style="dim")
        for j, cell in enumerate(row):
            text.append(GLYPHS[cell], style=STYLES[cell])
            if gap and j < n_cols - 1:
                text.append(gap)
        text.append("\n")
    counts = tally(grid)
    text.append("\n" + legend_title, style="dim")
    for cell in Cell:
        text.append("\n")
        text.append(GLYPHS[cell], style=STYLES[cell])
        text.append(f" {LEGEND[cell]:<16}{counts[cell]:>4}")
    return text


class VisitMapView(Static):
    """Draws a :class:`VisitMap`; empty (with a word why) when there is none."""

    drawn_width = 0  # columns the drawing takes (without border and padding)

    def show(self, visits: VisitMap | None) -> None:
        if visits is None or not visits.counts:
            drawn = Text("no visit map: the causal launch did not run", style="dim")
        else:
            drawn = render_map(visits)
        self.drawn_width = max((line.cell_len for line in drawn.split()), default=0)
        self.update(drawn)
