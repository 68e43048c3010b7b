"""The weight map: the attention weights the student's kernel applied, beside the reference's.

Drawn from a :class:`~tutor.harness.result.ReadOut` (one head, at the shape the
read-out ran): rows are queries, columns keys, one character per cell of
``map_cell`` x ``map_cell`` positions.  Every kind of cell has its own glyph, so
the map reads under ``NO_COLOR`` too:

=========  ===================================================================
glyph      meaning
=========  ===================================================================
``█▓▒░·``  weight, heaviest to lightest (each panel scaled to its own largest)
``+``      weight on a key the row must not see (the causal future)
``-``      weight missing: the reference gives weight, the kernel none
``~``      weight there, but the wrong amount (off by more than 2 %)
``!``      the row is NaN/Inf whatever V holds
``╲``      the diagonal (query = key), where the cell is otherwise right
``│ ─``    K/V block (columns) and query block (rows) boundaries
=========  ===================================================================
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tutor.harness.result import ReadOut

SHADES = "·░▒▓█"
MARKS: dict[str, tuple[str, str]] = {  # mark -> (glyph, style)
    "+": ("+", "bold red"),
    "-": ("-", "bold yellow"),
    "~": ("~", "magenta"),
    "!": ("!", "bold red reverse"),
}
LEGEND = [
    ("█▓▒░·", "", "weight, heavy to light"),
    ("+", "bold red", "on a key it must not see"),
    ("-", "bold yellow", "missing"),
    ("~", "magenta", "wrong amount"),
    ("!", "bold red reverse", "NaN"),
    ("╲", "cyan", "diagonal"),
]


def _shade(value: float, top: float) -> str:
    if value <= 0 or top <= 0:
        return " "
    level = min(len(SHADES) - 1, int(len(SHADES) * (value / top) ** 0.5))
    return SHADES[level]


def _panel_row(ro: ReadOut, i: int, values: list[float], top: float, marked: bool) -> list[tuple[str, str]]:
    """One row of one panel as (glyph, style) pairs, block boundaries included."""
    per_block = max(1, ro.block_n // ro.map_cell) if ro.block_n % ro.map_cell == 0 else 0
    cells: list[tuple[str, str]] = []
    for j, value in enumerate(values):
        if per_block and j and j % per_block == 0:
            cells.append(("│", "dim"))
        mark = ro.map_marks[i][j] if marked else "."
        if mark in MARKS:
            cells.append(MARKS[mark])
        elif i == j and mark in ".":
            cells.append(("╲", "cyan"))
        else:
            cells.append((_shade(value, top), "green"))
    return cells


def render_weights(ro: ReadOut) -> Text:
    """Yours (with every misplaced or missing weight marked) beside the reference."""
    n = len(ro.map_student)
    text = Text()
    if not n:
        return text
    top_s = max((max(row) for row in ro.map_student), default=0.0)
    top_r = max((max(row) for row in ro.map_reference), default=0.0)
    per_row_block = ro.block_m // ro.map_cell if ro.block_m % ro.map_cell == 0 else 0
    width = len(_panel_row(ro, 0, ro.map_student[0], top_s, True))
    seq = ro.shape[2] if ro.shape else n * ro.map_cell
    text.append(f"{ro.mode}, head {ro.head}, seq={seq}: 1 cell = {ro.map_cell}x{ro.map_cell} positions; "
                "rows queries, columns keys\n", style="dim")
    text.append("yours".ljust(width) + "   " + "reference" + "\n", style="bold")
    rule = "─" * width
    for i in range(n):
        if per_row_block and i and i % per_row_block == 0:
            text.append(rule + "   " + rule + "\n", style="dim")
        for glyph, style in _panel_row(ro, i, ro.map_student[i], top_s, True):
            text.append(glyph, style=style)
        text.append("   ")
        for glyph, style in _panel_row(ro, i, ro.map_reference[i], top_r, False):
            text.append(glyph, style=style)
        text.append("\n")
    for glyph, style, words in LEGEND:
        text.append(glyph, style=style)
        text.append(f" {words}  ")
    return text


class WeightMapView(Static):
    """Draws the read-out of the first failing mode (causal before full); hidden when none ran."""

    DEFAULT_CSS = """
    WeightMapView {
        width: auto;
        height: auto;
        padding: 0 1;
        margin-top: 1;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
    }
    """

    def show(self, readout: dict[str, ReadOut] | None) -> None:
        readout = readout or {}
        chosen = readout.get("causal") or readout.get("full") or next(iter(readout.values()), None)
        self.display = chosen is not None and bool(chosen.map_student)
        if chosen is not None:
            self.border_title = f"your attention weights ({chosen.mode})"
            self.update(render_weights(chosen))
        else:
            self.update("")
