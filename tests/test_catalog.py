"""The catalog's words for drill kinds and order: ``Drill.is_kernel``,
``kernel_drills()`` and ``next_drill()``, on a temporary content root whose
drills interleave the kinds (kernel, paper, kernel, paper)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor import catalog
from tutor.catalog import DRILL_KINDS, UnknownDrill, kernel_drills, next_drill
from tutor.paths import CONTENT_ROOT_ENV

KINDS = {"01": "kernel", "02": "paper", "03": "kernel", "04": "paper"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ("drills", "solutions"):
        (tmp_path / folder).mkdir()
    for drill_id, kind in KINDS.items():
        slug = f"{kind}_{drill_id}"
        (tmp_path / "drills" / f"{drill_id}_{slug}.toml").write_text(
            f'id = "{drill_id}"\nslug = "{slug}"\ntitle = "T{drill_id}"\nkind = "{kind}"\n'
            f'file = "{drill_id}_{slug}.py"\nsolution = "{drill_id}_{slug}_solution.py"\n'
            'teaches = "x"\ncompetency = "y"\n',
            encoding="utf-8",
        )
    # data beside a drill with a longer suffix is not a drill
    (tmp_path / "drills" / "02_paper_02.quiz.toml").write_text("[kinds]\n", encoding="utf-8")
    monkeypatch.setenv(CONTENT_ROOT_ENV, str(tmp_path))
    return tmp_path


def test_the_kinds_are_read_and_is_kernel_says_which(root: Path) -> None:
    drills = catalog.all_drills()
    assert [(d.id, d.kind) for d in drills] == list(KINDS.items())
    assert [d.is_kernel for d in drills] == [True, False, True, False]
    assert set(KINDS.values()) == set(DRILL_KINDS)


def test_kernel_drills_are_the_kernel_ones_in_order(root: Path) -> None:
    assert [d.id for d in kernel_drills()] == ["01", "03"]


def test_next_drill_walks_the_catalog_in_order_and_ends_with_none(root: Path) -> None:
    assert next_drill(None).id == "01"  # type: ignore[union-attr]
    assert [getattr(next_drill(i), "id", None) for i in KINDS] == ["02", "03", "04", None]


def test_next_drill_of_a_kind_skips_the_other_kind(root: Path) -> None:
    assert [getattr(next_drill(i, kind="kernel"), "id", None) for i in KINDS] == ["03", "03", None, None]
    assert [getattr(next_drill(i, kind="paper"), "id", None) for i in KINDS] == ["02", "04", "04", None]
    assert next_drill(None, kind="paper").id == "02"  # type: ignore[union-attr]


def test_next_drill_after_an_unknown_id_raises(root: Path) -> None:
    with pytest.raises(UnknownDrill, match="99"):
        next_drill("99")


def test_the_shipped_catalog_has_kernel_drills_and_one_follows_the_first() -> None:
    kernels = kernel_drills()
    assert kernels and all(d.is_kernel for d in kernels)
    assert next_drill(kernels[0].id) is not None
