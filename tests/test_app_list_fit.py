"""The drill list fits the terminal: at 80 columns the widest rows (a failing drill
solved before, a best error with its counted ratio) show without sideways scrolling,
the titles shortened with "…"; and before the progress file has been read the list
says so rather than calling every drill "not started"."""

from __future__ import annotations

from textual.app import App

from tutor.app.screens.drill_list import MIN_TITLE_WIDTH, DrillListScreen, DrillTable, title_width
from tutor.catalog import all_drills
from tutor.state.progress import IN_PROGRESS, NOT_STARTED, DrillSummary


def widest_rows() -> list[DrillSummary]:
    return [DrillSummary(drill, "failing", 12, 7.8e-4, best_work_ratio=1.6, solved_before=True)
            if drill.is_kernel else DrillSummary(drill, IN_PROGRESS, 0, None, quiz_score="quiz 7 right")
            for drill in all_drills()]


class ListApp(App[None]):
    def __init__(self, rows: list[DrillSummary], loaded: bool = True) -> None:
        super().__init__()
        self.rows, self.loaded = rows, loaded

    def on_mount(self) -> None:
        self.push_screen(DrillListScreen(self.rows, loaded=self.loaded))


def shown(table: DrillTable) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row(row.key)] for row in table.ordered_rows]


async def test_the_widest_rows_fit_80_columns_with_titles_shortened():
    async with ListApp(widest_rows()).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = pilot.app.screen.query_one(DrillTable)
        assert table.max_scroll_x == 0 and table.virtual_size.width <= 80
        titles = [row[2] for row in shown(table)]
        assert titles == [d.title for d in all_drills()]  # the cells keep the whole title ...
        title_column = table.ordered_columns[2]
        assert title_column.width < max(len(t) for t in titles)  # ... drawn in a narrower column
        lines = [table.render_line(y).text for y in range(1, 1 + len(titles))]  # under the header
        drill04 = next(line for line in lines if " 04 " in line)
        assert "The FlashAtten…" in drill04 and drill04.rstrip().endswith("7.8e-04 1.60x counted")
        assert "✘ failing · solved before" in drill04


async def test_a_wide_terminal_shows_whole_titles():
    async with ListApp(widest_rows()).run_test(size=(140, 24)) as pilot:
        await pilot.pause()
        table = pilot.app.screen.query_one(DrillTable)
        longest = max(len(d.title) for d in all_drills())
        assert table.ordered_columns[2].width == longest
        assert not any("…" in table.render_line(y).text for y in range(0, 8))


async def test_resizing_lays_the_columns_out_again():
    async with ListApp(widest_rows()).run_test(size=(140, 24)) as pilot:
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert pilot.app.screen.query_one(DrillTable).max_scroll_x == 0


def test_the_title_column_never_goes_under_its_minimum():
    cells = [["x" * 70, "01", "A title of some length", "3", "best"]]
    assert title_width(cells, 80) == MIN_TITLE_WIDTH
    assert title_width(cells, 200) == len("A title of some length")


async def test_before_the_progress_file_is_read_the_list_says_so():
    rows = [DrillSummary(drill, NOT_STARTED, 0, None) for drill in all_drills()]
    async with ListApp(rows, loaded=False).run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        screen = pilot.app.screen
        table = screen.query_one(DrillTable)
        assert {row[0] for row in shown(table)} == {"… reading progress"}
        assert "reading" in str(screen.query_one("#progress").render())
        screen.update_rows(rows, loaded=True)
        await pilot.pause()
        assert {row[0] for row in shown(table)} == {"· not started"}
        assert "0/" in str(screen.query_one("#progress").render())
