"""Shared set-up for the app's tests: workspaces, recorded results, app factories."""

from __future__ import annotations

import json
from pathlib import Path

from tutor.app.app import FlashTutorApp
from tutor.catalog import get_drill, pristine_path
from tutor.harness.result import CheckResult
from tutor.loop.engine import CheckFinished, TutorEngine
from tutor.state.workspace import init_workspace

RESULTS = Path(__file__).parent / "fixtures" / "results"
SNAPSHOT_WORKSPACE_LABEL = "~/flashtutor"  # shown instead of the tmp path, so snapshots do not change


# Typical student states of drill 01, as edits of the shipped file.
_TODO2_END = "        # straddles it, give the forbidden scores -inf here.\n"
_DIAGONAL_MASK = '        if CAUSAL:\n            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))\n'
_LOOP_BOUND = "    hi = N_CTX\n"
_EDITS: dict[str, list[tuple[str, str]]] = {
    "todo2_done": [(_TODO2_END, _TODO2_END + _DIAGONAL_MASK)],  # correct, every block still visited
    "stops_before_diagonal": [
        (_TODO2_END, _TODO2_END + _DIAGONAL_MASK),
        (_LOOP_BOUND, "    if CAUSAL:\n        hi = start_m * BLOCK_M\n    else:\n        hi = N_CTX\n"),
    ],
    "syntax_error": [(_LOOP_BOUND, "    hi = N_CTX +\n")],
}


def drill01_variant(name: str) -> str:
    """The shipped drill 01 with the edits of ``name`` (see ``_EDITS``)."""
    text = pristine_path(get_drill("01")).read_text(encoding="utf-8")
    for old, new in _EDITS[name]:
        if old not in text:
            raise AssertionError(f"drill 01 no longer contains {old!r}: update tests/helpers_app.py")
        text = text.replace(old, new, 1)
    return text


def make_workspace(root: Path) -> Path:
    """A fresh workspace made the way `flashtutor init` makes one."""
    return init_workspace(root / "workspace").workspace


def recorded_result(name: str, workspace: Path) -> CheckResult:
    """A result recorded from a real check (tests/fixtures/results/generate.py),
    its paths placed inside ``workspace``."""
    result = CheckResult.from_dict(json.loads((RESULTS / f"{name}.json").read_text()))
    result.file = str(workspace / result.file)
    if result.error is not None and result.error.file:
        result.error.file = str(workspace / result.error.file)
    return result


def record(engine: TutorEngine, name: str) -> CheckFinished:
    """Record a fixture result in the engine's progress store, as the engine does
    after a check, and return the event the engine would send."""
    result = recorded_result(name, engine.workspace)
    drill = get_drill(result.drill)
    rec = engine.progress.record_check(result, drill)
    return CheckFinished(result.drill, result, [drill.hints[i] for i in rec.newly_unlocked], rec.progress)


def offline_app(workspace: Path, **options) -> FlashTutorApp:
    """The app on an engine that is never started (no watcher, no worker):
    events come only from the test.  Spinners frozen, workspace label fixed."""
    engine = TutorEngine(workspace, device="cpu", watch=False, warm=False)
    options.setdefault("workspace_label", SNAPSHOT_WORKSPACE_LABEL)
    options.setdefault("animate", False)
    return FlashTutorApp(engine, live=False, **options)


WAIT_S = 90.0  # the longest a test waits for the app to reach a state (a bound, never a timing assertion)


async def wait_for(pilot, predicate, what: str, timeout_s: float = WAIT_S) -> None:
    """Let the app run until ``predicate()`` holds; fail naming ``what`` if it never does."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"the app never showed {what} (screen: {screen_text(pilot.app)!r})")
        await pilot.pause(0.05)


async def settle(pilot) -> None:
    """Let the app's thread workers (storing a quiz answer, resetting a drill, reading
    the progress file) finish and the UI take in what they posted, including the
    workers that what they posted started (a stored answer makes the app re-read
    the progress file)."""
    from textual.worker import WorkerState

    for _ in range(10):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers):
            return


def screen_text(app) -> str:
    """What the terminal shows now, as plain text, one line per row (notifications
    included).  Textual has no public text export; its compositor renders the rows."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
