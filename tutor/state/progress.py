"""The student's progress, kept in ``<workspace>/.flashtutor/progress.json``.

Per drill: its status (``not-started``, ``failing``, ``passed`` — the state of
the drill file as last checked; passed means that check *solved* it: PASSED
with no open finding), the number of attempts, when it was first solved and
after how many attempts (``solved_before``: a pass once recorded is never taken
back, even when the file is later reset or broken), the best error, the best
figures of a passing kernel, the recent attempts (for a sparkline) and the
hints it has unlocked.  Besides the drills: the quiz answers.

Two figures of a kernel's causal saving are kept apart, never in one field:

* ``work_ratio``: *counted* work, the K/V blocks the full launch visited over
  those the causal launch visited (from the visit maps), on any device;
* ``speedup``: the *timed* full/causal ratio, recorded only from a GPU (the
  interpreter's wall clock is no speed).

Files written before the two were kept apart hold one ``speedup`` per attempt
that may be either (an interpreter's wall-clock ratio, its counted ratio, or a
GPU's timed one): the attempt does not say on which device it ran, so it cannot
be decided.  Such a value is read and kept as it was, and
:attr:`DrillProgress.undecided_speedups` counts them so that a front end can say so.

An attempt is a distinct content: a check counts only when the file's bytes
(their git blob id, :func:`tutor.pristine.blob_id`) differ from the drill's last counted
attempt and from the drill as shipped, decided under the file lock, so two
front ends on one workspace count a save once, and opening a drill, starting
``watch`` or re-running ``check`` on an unchanged file count nothing.  Such a
check still runs and is shown; it sets the status (the file's current state)
once the drill has been worked on, and the diagnosis codes of an edit checked
again open the hints keyed to them (:mod:`tutor.state.hints`; attempt-count tiers
stay tied to counted attempts, and the drill as shipped opens nothing); it
changes nothing else.

Only a check whose kernel ran (PASSED or FAILED) is an attempt.  A save that
could not run (a syntax or import error, an empty file, a crash, a timeout:
``result.error`` is set) is kept in the history, marked with its error, and sets
the status to failing, but it adds no attempt and unlocks no hint: six broken
saves must not open "Nearly the answer" for a kernel that never ran.

Every change is a read-modify-write of the file under an advisory lock, so
two stores on one workspace (the engine's and the quiz's, or ``watch`` in one
terminal and ``launch`` in another) never undo each other's changes; the file
is replaced atomically (temp file + ``os.replace``), so a crash mid-write
cannot leave half a file behind.

Nothing is lost silently and nothing crashes:

* a corrupt or unreadable file is moved aside (``progress.json.corrupt-<time>``)
  and a fresh one started; the warning naming both paths is in ``warnings``;
* a workspace where the file cannot be written (read-only, full disk) keeps the
  progress in memory for this session; ``save_error`` says why, checks still run.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol, get_args

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one process per workspace, then
    fcntl = None  # type: ignore[assignment]

from tutor import codec
from tutor.catalog import Drill, Hint, get_drill
from tutor.harness.result import CheckResult
from tutor.paths import WORKSPACE_STATE_DIR
from tutor.pristine import PristineError, blob_id, manifest
from tutor.state.atomic import write_text_atomically
from tutor.state.hints import code_unlocks, earned_unlocks

STATE_FILE = "progress.json"
FORMAT_VERSION = 1
HISTORY_LIMIT = 50  # attempts kept per drill, newest last

# Where a drill stands: the state of its file as last checked (a paper drill: its quiz).
DrillStatus = Literal["not-started", "in-progress", "failing", "passed"]
NOT_STARTED: DrillStatus = "not-started"
IN_PROGRESS: DrillStatus = "in-progress"  # a paper drill whose quiz is not finished yet
FAILING: DrillStatus = "failing"
PASSED: DrillStatus = "passed"  # the last check solved it (PASSED with no open finding)
STATUSES: tuple[DrillStatus, ...] = get_args(DrillStatus)


class CorruptProgress(ValueError):
    """The state file parsed, but does not hold what this version writes."""


@dataclass
class Attempt:
    """One recorded check, as the attempt history keeps it."""

    at: float  # seconds since the epoch
    passed: bool  # every case within tolerance (there may still be a finding)
    solved: bool  # passed with no open finding
    max_abs_err: float | None
    speedup: float | None  # timed full/causal, on a GPU only (older files: see the module's words)
    codes: list[str] = field(default_factory=list)  # diagnosis codes
    error: str | None = None  # the error kind when the check could not run
    content: str | None = None  # git blob id of the file's bytes that were checked
    work_ratio: float | None = None  # counted K/V blocks, full launch over causal launch
    ran_on: str | None = None  # RAN_ON_GPU or RAN_ON_INTERPRETER; None: written before this was kept

    @property
    def speedup_undecided(self) -> bool:
        """A speed-up from a file written before timed and counted were kept apart:
        whether it was timed on a GPU or not cannot be told."""
        return self.ran_on is None and self.speedup is not None


@dataclass
class DrillProgress:
    status: DrillStatus = NOT_STARTED
    attempts: int = 0
    first_passed_at: float | None = None  # seconds since the epoch, first check that solved it
    attempts_to_pass: int | None = None  # how many checks that took
    best_max_abs_err: float | None = None  # smallest error of any check that produced an output
    best_speedup: float | None = None  # largest timed GPU full/causal speed-up of a check that PASSED
    best_speedup_timed: bool = False  # best_speedup was recorded as timed on a GPU (False in older files)
    best_work_ratio: float | None = None  # largest counted full/causal work ratio of a check that PASSED
    last_checked_at: float | None = None
    unlocked_hints: list[int] = field(default_factory=list)  # earned unlocks, indices into Drill.hints
    history: list[Attempt] = field(default_factory=list)

    @property
    def solved_before(self) -> bool:
        """Solved at least once: the solution gate opens for good."""
        return self.first_passed_at is not None

    def history_series(self) -> HistorySeries:
        """Error, timed GPU speed-up and counted work ratio of each recorded attempt,
        oldest first (the drill view's charts)."""
        return HistorySeries(
            errors=[a.max_abs_err for a in self.history],
            speedups=[a.speedup for a in self.history],
            work_ratios=[a.work_ratio for a in self.history],
            undecided=self.undecided_speedups,
            not_run=self.not_run,
        )

    @property
    def best_speedup_undecided(self) -> bool:
        """The best speed-up comes from a file written before timed and counted were
        kept apart: it may not have been timed on a GPU."""
        return self.best_speedup is not None and not self.best_speedup_timed

    @property
    def undecided_speedups(self) -> int:
        """How many recorded speed-ups cannot be told timed-on-a-GPU from not
        (attempts written before the two figures were kept apart)."""
        return sum(a.speedup_undecided for a in self.history)

    @property
    def last_content(self) -> str | None:
        """The content id of the last recorded check (an attempt, or a save that could not run)."""
        return self.history[-1].content if self.history else None

    @property
    def finding_open(self) -> bool:
        """The current file PASSED but is not solved: a finding is open (TODO 1 of drill 01...)."""
        last = self.history[-1] if self.history else None
        return self.status == FAILING and last is not None and last.passed and not last.solved

    @property
    def not_run(self) -> int:
        """How many saves in the history could not run (no attempts: see the module's words)."""
        return sum(a.error is not None for a in self.history)


class HistorySeries(NamedTuple):
    """The attempt history as the drill view charts it, oldest first."""

    errors: list[float | None]
    speedups: list[float | None]  # timed full/causal on a GPU (and older files' undecided ones)
    work_ratios: list[float | None]  # counted full/causal K/V blocks
    undecided: int = 0  # speed-ups from older files that may not have been timed on a GPU
    not_run: int = 0  # saves in the history that could not run (no attempts)


RAN_ON_GPU = "gpu"
RAN_ON_INTERPRETER = "interpreter"


class HasStatus(Protocol):
    """A drill's standing: :class:`DrillProgress` or :class:`DrillSummary`."""

    @property
    def status(self) -> DrillStatus: ...

    @property
    def solved_before(self) -> bool: ...

    @property
    def finding_open(self) -> bool: ...


FINDING_OPEN = "passed, finding open"  # the words for a file that PASSED with a finding (status failing)


def status_words(progress: HasStatus) -> str:
    """The status as a front end shows it: the current file's state (``passed, finding
    open`` for a file that PASSED with a finding: not solved, not failing either), and
    that it was solved before when the current file no longer is (``failing, solved before``)."""
    words = FINDING_OPEN if progress.finding_open else progress.status
    if progress.status != PASSED and progress.solved_before:
        return f"{words}, solved before"
    return words


def file_content_id(path: Path) -> str | None:
    """The id of the content of the file at ``path`` (git's blob id of its bytes,
    :func:`tutor.pristine.blob_id`); None when it cannot be read."""
    try:
        return blob_id(Path(path).read_bytes())
    except OSError:
        return None


def attempt_content_id(result: CheckResult) -> str | None:
    """What a check's attempt is counted by: the bytes the worker checked
    (``result.content_id``); the file as it is now only where the worker could
    not say (it crashed or timed out before it sent a result)."""
    return result.content_id or file_content_id(Path(result.file))


def _shipped_id(drill: Drill) -> str | None:
    try:
        return manifest().get(drill.file)
    except PristineError:
        return None


# The words every front end uses when progress cannot be written (read-only workspace,
# full disk, no workspace): one phrase, said loudly once (the store's warning) and
# quietly wherever something it shows is not kept.
NOT_SAVED = "progress is not being saved"


def not_saved_warning(reason: str) -> str:
    """The warning a front end says once: why, and that nothing outlives the session."""
    loud = NOT_SAVED.replace(" not ", " NOT ")
    return f"{reason}: {loud} (checks still run; nothing they record outlives this session)"


def not_saved_note(store: ProgressStore | None, scope: str) -> str:
    """What to add to a line that reports something recorded (a hint unlocked, answers
    kept) when it is not kept: "" when the store saves, else "for this <scope> only: ..."."""
    if store is not None and store.save_error is None:
        return ""
    if store is None:
        return f"for this {scope} only: no workspace, so {NOT_SAVED}"
    return f"for this {scope} only: {NOT_SAVED}"


def saved_words(store: ProgressStore | None, saved: str) -> str:
    """``saved`` when the store writes its file; else that nothing was saved, and why
    (a front end never claims it kept what it did not)."""
    if store is None:
        return f"nothing was saved: no workspace, so {NOT_SAVED}"
    if store.save_error is not None:
        return f"nothing was saved: {NOT_SAVED} in this workspace"
    return saved


NOT_COUNTED_SAME = "same content as your last attempt"
NOT_COUNTED_SHIPPED = "the drill as shipped, not yet edited"
NOT_COUNTED_NOT_RUN = "it could not run: only a check whose kernel ran is an attempt"


@dataclass(frozen=True)
class CheckRecord:
    """What recording one check changed: the drill's progress after it and the
    hints it unlocked (indices into ``Drill.hints``)."""

    drill: str
    progress: DrillProgress
    newly_unlocked: list[int]
    counted: bool = True  # False: not a new attempt (``not_counted`` says why)
    not_counted: str | None = None

    def unlocked_hints(self, drill: Drill) -> list[Hint]:
        """The hints this check unlocked, as the drill's :class:`~tutor.catalog.Hint` objects."""
        return [drill.hints[i] for i in self.newly_unlocked]


@dataclass
class QuizAnswer:
    """The latest answer to one quiz question."""

    answer: str
    correct: bool
    at: float  # seconds since the epoch
    attempts: int  # answers given to this question

    def __post_init__(self) -> None:  # as the file may hold them (an integer time)
        self.answer, self.correct = str(self.answer), bool(self.correct)
        self.at, self.attempts = float(self.at), int(self.attempts)


@dataclass
class _State:
    """What the file holds, besides its ``version``: written and read by :mod:`tutor.codec`
    from the dataclasses above, so a new field is one line (with its default).

    Older files: a field added later is absent there and takes its default, and the
    file is written whole in the current form at the next change.  A change that an
    absent field's default cannot express (a field renamed, removed or given another
    meaning) raises ``FORMAT_VERSION`` and converts the older versions' data in
    :meth:`from_json` before it is decoded."""

    drills: dict[str, DrillProgress] = field(default_factory=dict)
    quiz: dict[str, QuizAnswer] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {"version": FORMAT_VERSION, **codec.encode(self)}
        data["drills"] = dict(sorted(data["drills"].items()))
        return json.dumps(data, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> _State:
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
                raise CorruptProgress(f"not a version-{FORMAT_VERSION} progress file")
            state = codec.decode(cls, data, ignore_unknown=True)  # "version", and any other key beside the two
            for progress in state.drills.values():
                _check(progress)
        except CorruptProgress:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptProgress(f"{type(exc).__name__}: {exc}") from None
        return state


def _check(progress: DrillProgress) -> None:
    if progress.status not in STATUSES:
        raise CorruptProgress(f"unknown status {progress.status!r}")
    progress.unlocked_hints = sorted(int(i) for i in progress.unlocked_hints)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _ran_on(result: CheckResult) -> str | None:
    if result.device is None:
        return None
    return RAN_ON_INTERPRETER if result.device.interpreter else RAN_ON_GPU


def _larger(best: float | None, value: float | None) -> float | None:
    return best if value is None else value if best is None else max(best, value)


def _take_bests(progress: DrillProgress, attempt: Attempt) -> None:
    """The best figures of a check that PASSED: each kept in its own field."""
    timed = attempt.speedup if attempt.ran_on == RAN_ON_GPU else None  # never an older file's undecided one
    best = _larger(progress.best_speedup, timed)
    if best != progress.best_speedup:  # a new best, timed on a GPU
        progress.best_speedup, progress.best_speedup_timed = best, True
    progress.best_work_ratio = _larger(progress.best_work_ratio, attempt.work_ratio)


def _copy(progress: DrillProgress) -> DrillProgress:
    return replace(progress, unlocked_hints=list(progress.unlocked_hints),
                   history=[replace(a, codes=list(a.codes)) for a in progress.history])


class ProgressStore:
    """The progress of one workspace.  Thread-safe; every getter returns a copy."""

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)
        self.directory = self.workspace / WORKSPACE_STATE_DIR
        self.path = self.directory / STATE_FILE
        self.warnings: list[str] = []  # what a front end should show once (file moved aside, not writable)
        self.save_error: str | None = None  # set once writing failed; progress is then kept in memory only
        self._lock = threading.RLock()
        self._state = self._read()
        writable_dir = self.directory if self.directory.exists() else self.workspace
        if self.directory.exists() and not self.directory.is_dir():
            self._memory_only(f"cannot save progress: {self.directory} is not a folder")
        elif not os.access(writable_dir, os.W_OK):
            self._memory_only(f"cannot save progress: {writable_dir} is not writable")

    # -- reading -------------------------------------------------------------------
    def drill(self, drill_id: str) -> DrillProgress:
        with self._lock:
            self._refresh()
            return _copy(self._state.drills.get(drill_id, DrillProgress()))

    def all_drills(self) -> dict[str, DrillProgress]:
        with self._lock:
            self._refresh()
            return {key: _copy(value) for key, value in self._state.drills.items()}

    def status(self, drill_id: str) -> DrillStatus:
        return self.drill(drill_id).status

    def unlocked_hints(self, drill_id: str) -> list[int]:
        """The hints this drill has earned (open-from-start ones are not stored)."""
        return self.drill(drill_id).unlocked_hints

    def quiz_answers(self) -> dict[str, dict[str, Any]]:
        """question id -> {"answer", "correct", "at", "attempts"} (the latest answer)."""
        with self._lock:
            self._refresh()
            return {key: codec.encode(value) for key, value in self._state.quiz.items()}

    # -- changing ------------------------------------------------------------------
    def record_check(self, result: CheckResult, drill: Drill | None = None, content: str | None = None) -> CheckRecord:
        """Record one check of ``result.drill``, whose file held ``content`` (its
        :func:`file_content_id`; None: unknown, always counted).  A new content counts as
        an attempt: status, attempts, bests, history and the hints its diagnosis
        codes or the new attempt count unlock.  The last recorded content or the
        shipped drill again is not an attempt (``CheckRecord.counted`` is False);
        the last counted content's codes still open the hints keyed to them.  A
        check that could not run (``result.error``) is kept in the history and sets
        the status, but is no attempt and unlocks nothing."""
        meta = drill or get_drill(result.drill)
        now = time.time()
        ran = result.error is None
        attempt = Attempt(
            at=now,
            passed=result.passed,
            solved=result.solved,
            max_abs_err=_finite(result.max_abs_err) if ran else None,
            speedup=_finite(result.gpu_speedup) if ran else None,
            codes=list(result.codes),
            error=None if result.error is None else result.error.kind,
            content=content,
            work_ratio=_finite(result.work_ratio) if ran else None,
            ran_on=_ran_on(result),
        )
        shipped = _shipped_id(meta) if content is not None else None
        newly: list[int] = []
        why: list[str] = []

        def unlock(progress: DrillProgress, earned: set[int]) -> None:
            newly[:] = sorted(earned - set(progress.unlocked_hints))
            progress.unlocked_hints = sorted(set(progress.unlocked_hints) | earned)

        def change(state: _State) -> None:
            progress = state.drills.setdefault(meta.id, DrillProgress())
            last_ran = not progress.history or progress.history[-1].error is None
            if content is not None and content == progress.last_content and (last_ran or not ran):
                why[:] = [NOT_COUNTED_SAME]  # (content that could not run, now run, is new)
            elif content is not None and content == shipped:
                why[:] = [NOT_COUNTED_SHIPPED]
            if why:  # not an attempt: only the current file's state, once the drill is under way
                if progress.attempts or progress.solved_before:
                    progress.status = PASSED if attempt.solved else FAILING
                    progress.last_checked_at = now
                if content != shipped and ran:  # the student's edit checked again: its codes open their hints
                    unlock(progress, code_unlocks(meta, attempt.codes))
                return
            if not ran:  # kept in the history, the file's state; no attempt, no hint
                why[:] = [NOT_COUNTED_NOT_RUN]
                progress.status, progress.last_checked_at = FAILING, now
                progress.history = [*progress.history, attempt][-HISTORY_LIMIT:]
                return
            progress.attempts += 1
            progress.last_checked_at = now
            progress.status = PASSED if attempt.solved else FAILING
            if attempt.solved and progress.first_passed_at is None:
                progress.first_passed_at = now
                progress.attempts_to_pass = progress.attempts
            if attempt.max_abs_err is not None:
                best = progress.best_max_abs_err
                progress.best_max_abs_err = attempt.max_abs_err if best is None else min(best, attempt.max_abs_err)
            if attempt.passed:
                _take_bests(progress, attempt)
            progress.history = [*progress.history, attempt][-HISTORY_LIMIT:]
            unlock(progress, earned_unlocks(meta, progress.attempts, attempt.codes))

        state = self._update(change)
        return CheckRecord(drill=meta.id, progress=_copy(state.drills[meta.id]), newly_unlocked=list(newly),
                           counted=not why, not_counted=why[0] if why else None)

    def record_performance(self, result: CheckResult, content: str | None = None) -> DrillProgress:
        """The performance phase of the check just recorded by :meth:`record_check`
        completed: its timed speed-up (on a GPU only) and counted work ratio go into
        that attempt and the drill's bests.  Not an attempt of its own.  With
        ``content``, only into an attempt of that content (a check that was not
        counted, such as the drill as shipped, leaves the last attempt's numbers alone)."""
        ran = result.error is None
        speedup = _finite(result.gpu_speedup) if ran else None
        work_ratio = _finite(result.work_ratio) if ran else None

        def change(state: _State) -> None:
            progress = state.drills.get(result.drill)
            if progress is None or not progress.history or (speedup is None and work_ratio is None):
                return
            last = progress.history[-1]
            if content is not None and last.content not in (content, None):
                return
            if speedup is not None:
                last.speedup, last.ran_on = speedup, RAN_ON_GPU
            elif last.ran_on is None and last.speedup is None:
                last.ran_on = _ran_on(result)  # an older attempt's undecided speed-up stays undecided
            if work_ratio is not None:
                last.work_ratio = work_ratio
            if last.passed:
                _take_bests(progress, last)

        state = self._update(change)
        return _copy(state.drills.get(result.drill, DrillProgress()))

    def record_diagnosis(self, result: CheckResult, drill: Drill | None = None,
                         content: str | None = None) -> CheckRecord:
        """The diagnosis phase of the check just recorded by :meth:`record_check`
        landed: its codes go into that attempt (with ``content``, only into an attempt
        of that content) and open the hints keyed to them.  Not an attempt of its own;
        ``newly_unlocked`` are the hints it opened."""
        meta = drill or get_drill(result.drill)
        codes = list(result.codes)
        newly: list[int] = []

        def change(state: _State) -> None:
            progress = state.drills.get(meta.id)
            if progress is None:
                return
            if progress.history and (content is None or progress.history[-1].content in (content, None)):
                progress.history[-1].codes = codes
            if content is not None and content == _shipped_id(meta):
                return  # the drill as shipped opens nothing
            earned = code_unlocks(meta, codes)
            newly[:] = sorted(earned - set(progress.unlocked_hints))
            progress.unlocked_hints = sorted(set(progress.unlocked_hints) | earned)

        state = self._update(change)
        return CheckRecord(drill=meta.id, progress=_copy(state.drills.get(meta.id, DrillProgress())),
                           newly_unlocked=list(newly))

    def set_status(self, drill_id: str, status: DrillStatus) -> None:
        """Set a drill's status directly (a paper drill's quiz decides it)."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {status!r}")

        def change(state: _State) -> None:
            progress = state.drills.setdefault(drill_id, DrillProgress())
            progress.status = status
            if status == PASSED and progress.first_passed_at is None:
                progress.first_passed_at = time.time()

        self._update(change)

    def record_quiz_answer(
        self, question_id: str, answer: str, correct: bool, drill: Drill | None = None, codes: Iterable[str] = ()
    ) -> list[int]:
        """Store the latest answer to a quiz question.  With the paper ``drill``, the
        answer also counts towards its hints, as a check does for a kernel drill: a
        slip code opens the hints naming it, and every answer counts as an attempt.
        Returns the hints (indices) this answer unlocked."""
        slips = list(codes)
        newly: list[int] = []

        def change(state: _State) -> None:
            previous = state.quiz.get(question_id)
            state.quiz[question_id] = QuizAnswer(answer=answer, correct=bool(correct), at=time.time(),
                                                 attempts=(previous.attempts if previous else 0) + 1)
            if drill is not None:
                progress = state.drills.setdefault(drill.id, DrillProgress())
                answers = sum(entry.attempts for entry in state.quiz.values())
                progress.attempts = answers  # a paper drill's attempts: its answers, one count everywhere
                earned = earned_unlocks(drill, answers, slips)
                newly[:] = sorted(earned - set(progress.unlocked_hints))
                progress.unlocked_hints = sorted(set(progress.unlocked_hints) | earned)

        self._update(change)
        return newly

    # -- the file ------------------------------------------------------------------
    def _update(self, change: Callable[[_State], object]) -> _State:
        with self._lock:
            if self.save_error is not None:  # memory-only for the rest of this session
                change(self._state)
                return self._state
            try:
                with self._file_lock():
                    self._state = self._read()
                    change(self._state)
                    self._write(self._state)
            except OSError as exc:
                self._memory_only(f"cannot save progress to {self.path}: {exc.strerror or exc}")
                change(self._state)
            return self._state

    def _refresh(self) -> None:
        if self.save_error is None:
            self._state = self._read()

    def _read(self) -> _State:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # no file yet (or no state directory)
            return _State()
        except (OSError, UnicodeDecodeError) as exc:
            return self._start_fresh(f"could not be read ({exc})")
        try:
            return _State.from_json(text)
        except CorruptProgress as exc:
            return self._start_fresh(f"is corrupt ({exc})")

    def _start_fresh(self, problem: str) -> _State:
        aside = self.path.with_name(f"{STATE_FILE}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while aside.exists():
            aside = aside.with_name(f"{STATE_FILE}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            # leave the file alone rather than overwrite what we could not read
            self._memory_only(f"{self.path} {problem} and could not be moved aside ({exc.strerror or exc})")
            return _State()
        self.warnings.append(f"{self.path} {problem}: moved it to {aside} and started a fresh progress file")
        return _State()

    def _write(self, state: _State) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_text_atomically(self.path, state.to_json(), durable=True)

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        """An advisory lock on the state directory, held across read-modify-write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _memory_only(self, message: str) -> None:
        if self.save_error is None:
            self.save_error = message
            self.warnings.append(not_saved_warning(message))


@dataclass(frozen=True)
class DrillSummary:
    """One drill as a list shows it: where it stands, from the catalog and the progress file."""

    drill: Drill
    status: DrillStatus
    attempts: int
    best_error: float | None = None
    best_speedup: float | None = None  # timed on a GPU (DrillProgress.best_speedup)
    best_work_ratio: float | None = None  # counted (DrillProgress.best_work_ratio)
    best_speedup_undecided: bool = False  # from an older file: maybe not timed on a GPU
    quiz_score: str = ""  # paper drills: "quiz 4 right"
    solved_before: bool = False  # solved once (DrillProgress.solved_before)
    finding_open: bool = False  # the current file PASSED with a finding (DrillProgress.finding_open)

    @property
    def done(self) -> bool:
        """Counted as done in every front end's tally: solved once, or passed now."""
        return self.solved_before or self.status == PASSED


def done_count(rows: Iterable[DrillSummary]) -> int:
    """How many drills are done (:attr:`DrillSummary.done`): the one tally of the app and `list`."""
    return sum(row.done for row in rows)


def drill_summaries(store: ProgressStore | None, drills: Iterable[Drill]) -> list[DrillSummary]:
    """A :class:`DrillSummary` per drill, in the order given (one read of the progress file each);
    with no ``store`` (no workspace) every drill is untouched.  The app's list and
    ``flashtutor list`` both show these."""
    if store is None:
        return summarize({}, {}, drills)
    return summarize(store.all_drills(), store.quiz_answers(), drills)


def summarize(progress: dict[str, DrillProgress], answers: dict[str, dict[str, Any]],
              drills: Iterable[Drill]) -> list[DrillSummary]:
    """:func:`drill_summaries` from progress already read (``ProgressStore.all_drills``
    and ``quiz_answers``, or the records the engine's events carried: the app)."""
    rows = []
    for drill in drills:
        p = progress.get(drill.id, DrillProgress())
        quiz = ""
        if not drill.is_kernel:
            right = sum(1 for a in answers.values() if a["correct"])
            quiz = f"quiz {right} right" if answers else "quiz"
        rows.append(DrillSummary(drill, p.status, p.attempts, p.best_max_abs_err, p.best_speedup,
                                 p.best_work_ratio, p.best_speedup_undecided, quiz, solved_before=p.solved_before,
                                 finding_open=p.finding_open))
    return rows
