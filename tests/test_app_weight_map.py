"""The weight map: the student's attention weights beside the reference, every kind of
cell told apart by its glyph (so it reads under NO_COLOR), block boundaries drawn."""

from __future__ import annotations

import math

import torch
from textual.app import App, ComposeResult

from tutor.app.widgets.weight_map import WeightMapView, render_weights
from tutor.harness.problems.attention import readout
from tutor.harness.result import ReadOut

H, N, D, B = 1, 64, 64, 16


def _read(kind: str) -> ReadOut:
    """A read-out measured from weights made here: right, or a mask that lets every row
    see the next key, or one that drops every row's own key."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(H, N, D, generator=g, dtype=torch.float64) for _ in range(2))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    rows, cols = torch.arange(N)[:, None], torch.arange(N)[None, :]
    allowed = {"right": cols <= rows, "next-key": cols <= rows + 1, "own-missing": (cols < rows) | (cols == 0)}[kind]
    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    ro = readout.measure(w, s, True, B, B, D)
    ro.shape = [1, H, N, D]
    return ro


def test_each_mistake_has_its_own_glyph_and_the_blocks_are_drawn():
    right = render_weights(_read("right")).plain
    ahead = render_weights(_read("next-key")).plain
    missing = render_weights(_read("own-missing")).plain
    yours = lambda text: "\n".join(line.split("   ")[0] for line in text.splitlines()[2:-1])  # noqa: E731
    assert "+" not in yours(right) and "-" not in yours(right)
    assert "+" in yours(ahead) and "-" not in yours(ahead)
    assert "-" in yours(missing) and "+" not in yours(missing)
    assert "╲" in right and "│" in right and "─" in right  # diagonal, key-block and query-block boundaries
    for words in ("yours", "reference", "on a key it must not see", "missing", "wrong amount"):
        assert words in right


class _Host(App):
    def compose(self) -> ComposeResult:
        yield WeightMapView(id="weights")


async def test_the_widget_draws_at_a_fixed_size_and_hides_without_a_read_out():
    app = _Host()
    async with app.run_test(size=(100, 40)) as pilot:
        view = app.query_one(WeightMapView)
        view.show({})
        await pilot.pause()
        assert view.display is False
        view.show({"causal": _read("next-key")})
        await pilot.pause()
        assert view.display is True
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "your attention weights (causal)" in text
        assert "yours" in text and "reference" in text and "+" in text


async def test_the_drill_view_shows_the_weights_of_a_failing_check_below_the_visit_map(tmp_path):
    from helpers_app import make_workspace, offline_app, recorded_result, screen_text

    from tutor.app.screens.drill_view import DrillScreen

    workspace = make_workspace(tmp_path)
    app = offline_app(workspace)
    async with app.run_test(size=(120, 80)) as pilot:
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        result = recorded_result("01_failing", workspace)
        result.readout = {"causal": _read("next-key")}
        app.screen.show_result(result)
        await pilot.pause()
        text = screen_text(app)
        assert "visited blocks" in text  # the visit map stays
        assert "your attention weights (causal)" in text and "on a key it must not see" in text
        passing = recorded_result("01_passing", workspace)
        app.screen.show_result(passing)
        await pilot.pause()
        assert "your attention weights" not in screen_text(app)
