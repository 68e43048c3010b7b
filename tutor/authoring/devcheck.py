"""``flashtutor dev check``: is every drill consistent with what it claims?

The rustlings-style author's check.  For every drill under a content root
(``drills/`` + ``solutions/``) it verifies, from the drill's data alone:

data (``--quick`` stops here; no kernel runs)
    the drill's TOML parses, its id and slug match its file name, the files it
    names exist, a kernel drill names a known problem, a tolerance, a
    ``[shipped]`` table and a severity for every diagnosis;
    every code a hint unlocks on exists (``[diagnoses.CODE]`` for a kernel
    drill, a slip code of ``NN_slug.quiz.toml`` for a paper drill);
    ``solutions/NN_slug.mistakes.toml`` parses, every edit applies to its base
    file exactly once, and every code an entry expects exists;
    every ``[diagnoses]`` code is expected by some fixture (an entry of the
    mistakes file, or ``[shipped]``).
kernels (each in a fresh worker, through the real harness)
    the shipped file says exactly what ``[shipped]`` documents; the solution
    PASSES with no diagnosis at all; every mistakes entry gives exactly its
    codes and verdict; and then every diagnosis code is *produced* by a
    fixture whose run matched.

Codes compare in order.  Info-level codes a check reports may be listed or
left out of a fixture's ``codes``; error- and finding-level codes must all be
listed.  Nothing here imports torch or Textual: the kernels run in
:class:`tutor.loop.runner.Worker` processes.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor.authoring import student_kernels as mistakes_mod
from tutor.catalog import DRILL_KINDS, SEVERITIES, Drill, UnknownDrill, drill_tomls, read_drill
from tutor.harness.result import code_name, codes_match  # no torch: the result's plain dataclasses
from tutor.paths import CONTENT_ROOT_ENV, content_root

if TYPE_CHECKING:
    from tutor.harness.device import DeviceChoice
    from tutor.harness.result import CheckResult

CHECK_TIMEOUT_S = 180.0


@dataclass
class Row:
    """One line of the table: ``where`` is ``path:line`` relative to the content root when known."""

    drill: str
    check: str
    ok: bool
    detail: str = ""
    where: str = ""


@dataclass
class Report:
    root: str
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.rows if not row.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "ok": self.ok, "failed": len(self.failed), "rows": [asdict(r) for r in self.rows]}


# --- locating things in the data files ------------------------------------------------------


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _line_of(text: str, pattern: str, after: int = 0) -> int | None:
    """The 1-based number of the first line after line ``after`` matching ``pattern`` (a regex)."""
    regex = re.compile(pattern)
    for number, line in enumerate(text.splitlines(), 1):
        if number > after and regex.search(line):
            return number
    return None


def _at(path: Path, root: Path, line: int | None) -> str:
    return f"{_rel(path, root)}:{line}" if line else _rel(path, root)


def _toml_error_line(exc: Exception) -> int | None:
    found = re.search(r"line (\d+)", str(exc))
    return int(found.group(1)) if found else None


def drill_files(root: Path) -> list[Path]:
    """Every ``drills/NN_slug.toml`` (longer suffixes such as ``.quiz.toml`` are other data)."""
    return drill_tomls(root)


def _matches(key: str, path: Path, drill: Drill | None) -> bool:
    stem = path.stem
    names = {stem, stem[:2], stem[:2].lstrip("0"), stem[3:]}
    if drill is not None:
        names |= {drill.id, drill.id.lstrip("0"), drill.slug, drill.name}
    return key.lower() in names


# --- the data checks ------------------------------------------------------------------------


@dataclass
class _Fixture:
    """Something whose check must say ``codes``: the shipped file or a mistakes entry."""

    label: str  # "shipped" or "fixture NAME"
    file: Path | None  # what to check (None: the entry does not apply)
    passes: bool | None  # None: the shipped file of a drill with no [shipped] table
    codes: tuple[str, ...]
    where: str
    mistake: mistakes_mod.Mistake | None = None  # a mistakes entry whose edits apply


TITLE_WIDTH = 40  # the title column of `flashtutor list` (tutor/cli/check.py)


def _data_rows(drill: Drill, toml: Path, root: Path) -> tuple[list[Row], list[_Fixture]]:
    rows: list[Row] = []
    text = toml.read_text(encoding="utf-8")

    def fail(check: str, detail: str, line: int | None = None, path: Path = toml) -> None:
        rows.append(Row(drill.id, check, False, detail, _at(path, root, line)))

    # identity and files
    problems_before = len(rows)
    if toml.stem != drill.name:
        fail("data", f"id/slug make {drill.name!r} but the file is {toml.name}: rename one",
             _line_of(text, r"^(id|slug)\s*="))
    if len(drill.title) > TITLE_WIDTH:
        fail("data", f"title is {len(drill.title)} characters: `flashtutor list` gives a title {TITLE_WIDTH}",
             _line_of(text, r"^title\s*="))
    for key, table in (("summary", "README.md"), ("shipped_summary", "drills/README.md")):
        if not getattr(drill, key):
            fail("data", f"{key} is missing: one line for {table}'s drill table (`flashtutor dev sync` writes it)")
    if drill.kind not in DRILL_KINDS:
        fail("data", f"kind = {drill.kind!r}: a drill is kind = " + " or ".join(f'"{k}"' for k in DRILL_KINDS),
             _line_of(text, r"^kind\s*="))
    for folder, name, key in (("drills", drill.file, "file"), ("solutions", drill.solution, "solution")):
        if not (root / folder / name).is_file():
            fail("data", f"{key} = {name!r}, but {folder}/{name} does not exist: create it",
                 _line_of(text, rf"^{key}\s*="))
    for code, words in drill.diagnoses.items():
        if words.severity not in SEVERITIES:
            fail("data", f"[diagnoses.{code}] severity = {words.severity!r}: use one of {', '.join(SEVERITIES)}",
                 _line_of(text, rf"^\[diagnoses\.{re.escape(code)}\]"))
    if drill.is_kernel:
        from tutor.harness.problems import PROBLEMS

        if drill.problem not in PROBLEMS:
            fail("data", f"problem = {drill.problem!r} is not in tutor.harness.problems.PROBLEMS "
                 f"(known: {', '.join(sorted(PROBLEMS))})", _line_of(text, r"^problem\s*="))
        if drill.tolerance <= 0:
            fail("data", "a kernel drill needs tolerance = <max abs error> (> 0), with a comment that justifies it",
                 _line_of(text, r"^tolerance\s*="))
        if not drill.modes:
            fail("data", 'a kernel drill needs modes = ["full"] or ["full", "causal"]', _line_of(text, r"^modes\s*="))
        if drill.shipped is None:
            fail("data", "no [shipped] table: run the shipped file (flashtutor check) and write what it says: "
                 "[shipped] passes = false, codes = [\"...\"]")
    if len(rows) == problems_before:
        rows.append(Row(drill.id, "data", True, f"{toml.name} parses; its files exist"))

    # placeholders left by `flashtutor dev new`
    rows += _placeholder_rows(drill, toml, root)

    # codes the hints unlock on
    known = set(drill.diagnoses) if drill.is_kernel else _quiz_codes(drill, root, rows)
    where_known = f"[diagnoses] of {toml.name}" if drill.is_kernel else f"the slip codes of {drill.name}.quiz.toml"
    bad_hints = 0
    for hint in drill.hints:
        title_line = _line_of(text, re.escape(hint.title)) or 0
        for code in hint.unlock_codes:
            if code not in known:
                bad_hints += 1
                fail("hint codes", f"hint {hint.title!r} unlocks on {code!r}, which is not in {where_known}: "
                     f"add [diagnoses.{code}] or fix the code" if drill.is_kernel else
                     f"hint {hint.title!r} unlocks on {code!r}, which is not in {where_known}",
                     _line_of(text, rf"[\"']{re.escape(code)}[\"']", after=title_line) or title_line or None)
    if not bad_hints:
        count = sum(len(h.unlock_codes) for h in drill.hints)
        rows.append(Row(drill.id, "hint codes", True, f"{count} code(s) named by {len(drill.hints)} hint(s) all exist"))
    if not drill.is_kernel:
        return rows, []

    # the shipped file and the mistakes entries: the fixtures
    fixtures: list[_Fixture] = []
    shipped_line = _line_of(text, r"^\[shipped\]")
    if drill.shipped is not None:
        unknown = [c for c in drill.shipped.codes if c not in drill.diagnoses]
        if unknown:
            fail("shipped codes", f"[shipped] codes {unknown} have no [diagnoses.CODE] words", shipped_line)
        fixtures.append(_Fixture("shipped", root / "drills" / drill.file, drill.shipped.passes,
                                 drill.shipped.codes, _at(toml, root, shipped_line)))
    else:  # still run it: its row then says what to write into [shipped]
        fixtures.append(_Fixture("shipped", root / "drills" / drill.file, None, (), _rel(toml, root)))
    fixtures += _mistake_fixtures(drill, root, rows)
    return rows, fixtures


def _placeholder_rows(drill: Drill, toml: Path, root: Path) -> list[Row]:
    """One FAIL row per ``AUTHOR:`` marker (``dev new`` leaves them where something is to be written)."""
    from tutor.authoring.devnew import MARKER
    from tutor.authoring.templates import PROBLEMS_DIR

    files = [toml, root / "drills" / drill.file, root / "solutions" / drill.solution,
             mistakes_mod.mistakes_path(drill, root), PROBLEMS_DIR / f"{drill.problem}.py"]
    rows = []
    for path in files:
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if MARKER in line:
                todo = line.split(MARKER, 1)[1].strip().rstrip('"').strip()
                rows.append(Row(drill.id, "placeholders", False, f"write this, then delete the {MARKER} marker: {todo}",
                                _at(path, root, number)))
    return rows


def _derived_rows(root: Path) -> list[Row]:
    """A FAIL row per file derived from the catalog that does not say what the TOML does."""
    from tutor.authoring import derived

    try:
        stale = derived.stale(root)
    except derived.MissingMarkers as exc:
        return [Row("-", "derived", False, str(exc), _rel(root, root))]
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError):
        return []  # a TOML that does not parse has its own row
    return [Row("-", "derived", False, f"stale: run {derived.SYNC_COMMAND}", _rel(path, root)) for path in stale]


def _quiz_codes(drill: Drill, root: Path, rows: list[Row]) -> set[str]:
    """The slip codes a paper drill's quiz can report (``drills/NN_slug.quiz.toml``)."""
    path = root / "drills" / f"{drill.name}.quiz.toml"
    if not path.is_file():
        return set()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        rows.append(Row(drill.id, "quiz data", False, f"does not parse: {exc}", _at(path, root, _toml_error_line(exc))))
        return set()
    codes = set(data.get("common_slips", {}))
    for kind in data.get("kinds", {}).values():
        codes |= set(kind.get("slips", {}))
    for choice in data.get("choices", {}).values():
        codes |= {o["slip"] for o in choice.get("options", ()) if o.get("slip")}
    rows.append(Row(drill.id, "quiz data", True, f"{path.name} parses; {len(codes)} slip codes"))
    return codes


def _mistake_fixtures(drill: Drill, root: Path, rows: list[Row]) -> list[_Fixture]:
    path = mistakes_mod.mistakes_path(drill, root)
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    try:
        entries = mistakes_mod.load(drill, root)
    except tomllib.TOMLDecodeError as exc:
        rows.append(Row(drill.id, "mistakes", False, f"does not parse: {exc}", _at(path, root, _toml_error_line(exc))))
        return []
    except KeyError as exc:
        rows.append(Row(drill.id, "mistakes", False, f"an entry lacks the key {exc}: every [[mistake]] needs "
                        "name and says", _rel(path, root)))
        return []
    fixtures, bad, seen = [], 0, set()
    for entry in entries:
        line = _line_of(text, rf"^name\s*=\s*[\"']{re.escape(entry.name)}[\"']")
        where = _at(path, root, line)
        problems = []
        if entry.name in seen:
            problems.append(f"the name {entry.name!r} is used twice")
        seen.add(entry.name)
        if entry.base not in ("solution", "drill"):
            problems.append(f"base = {entry.base!r}: use \"solution\" or \"drill\"")
        # "error:<kind>" is what a check that cannot run says (a compile error, say): no words of the drill's;
        # a code ending in "?" is one the random inputs decide (said or not, in its place), as in gpu_codes
        unknown = [c for c in entry.codes if code_name(c) not in drill.diagnoses and not c.startswith("error:")]
        if unknown:
            problems.append(f"codes {unknown} have no [diagnoses.CODE] in {drill.name}.toml")
        if not entry.passes and not entry.codes:
            problems.append("a failing entry must name the codes its check reports")
        errors = [c for c in map(code_name, entry.codes) if entry.passes and c in drill.diagnoses
                  and drill.diagnoses[c].severity == "error"]
        if errors:  # a check that PASSES says no error-level code: "error" means why it FAILED
            problems.append(f"passes = true, but codes {errors} are severity \"error\" (why a check FAILS): "
                            "make them \"finding\" or the entry failing")
        file = None
        if entry.base in ("solution", "drill"):
            try:
                entry.text(drill, root)
                file = entry
            except (mistakes_mod.BadMistake, OSError) as exc:
                problems.append(str(exc))
        for problem in problems:
            bad += 1
            rows.append(Row(drill.id, f"fixture {entry.name}", False, problem, where))
        fixtures.append(_Fixture(f"fixture {entry.name}", None, entry.passes, entry.codes, where, file))
    if not bad:
        rows.append(Row(drill.id, "mistakes", True, f"{path.name}: {len(entries)} entries parse and apply"))
    return fixtures


def _gpu_codes(fixture: _Fixture) -> tuple[str, ...]:
    """The codes a fixture documents for a compiled GPU check (none where it has no ``gpu_codes``)."""
    if fixture.mistake is None or fixture.mistake.gpu_codes is None:
        return ()
    return tuple(code_name(c) for c in fixture.mistake.gpu_codes)


def _coverage_rows(drill: Drill, toml: Path, root: Path, fixtures: list[_Fixture],
                   verified: set[str] | None) -> list[Row]:
    """One FAIL row per diagnosis code no fixture expects (or, after the kernel runs, produced).
    A code only a compiled GPU check can say is covered by a fixture's ``gpu_codes``."""
    text = toml.read_text(encoding="utf-8")
    usable = [f for f in fixtures if verified is None or f.label in verified]
    covered = {code for f in usable for code in (*f.codes, *_gpu_codes(f))}
    rows = []
    for code in drill.diagnoses:
        if code in covered:
            continue
        if verified is not None and any(code in (*f.codes, *_gpu_codes(f)) for f in fixtures):
            detail = f"[diagnoses.{code}]: the fixtures that expect it did not produce it (see their rows)"
        else:
            detail = (f"[diagnoses.{code}] has no fixture: add a [[mistake]] with codes = [\"{code}\"] to "
                      f"solutions/{drill.name}{mistakes_mod.SUFFIX} (a kernel with exactly that mistake)")
        rows.append(Row(drill.id, "code fixtures", False, detail,
                        _at(toml, root, _line_of(text, rf"^\[diagnoses\.{re.escape(code)}\]"))))
    if not rows:
        how = "expected by" if verified is None else "produced by"
        rows.append(Row(drill.id, "code fixtures", True,
                        f"all {len(drill.diagnoses)} diagnosis codes {how} a fixture"))
    return rows


# --- the kernel runs ------------------------------------------------------------------------


@contextmanager
def _content_root_env(root: Path) -> Iterator[None]:
    """Workers started inside this block look drills up under ``root``."""
    before = os.environ.get(CONTENT_ROOT_ENV)
    os.environ[CONTENT_ROOT_ENV] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONTENT_ROOT_ENV, None)
        else:
            os.environ[CONTENT_ROOT_ENV] = before


def _run_checks(jobs: list[tuple[str, Path]], root: Path, device: DeviceChoice,
                progress: Callable[[str], None]) -> list[CheckResult]:
    """Check each ``(drill id, file)`` in a fresh worker (the next one starts while this one runs)."""
    from tutor.harness.job import CheckJob
    from tutor.loop.runner import Worker

    results: list[CheckResult] = []
    with _content_root_env(root):
        upcoming = Worker(device) if jobs else None
        for index, (drill_id, file) in enumerate(jobs):
            worker, upcoming = upcoming, (Worker(device) if index + 1 < len(jobs) else None)
            assert worker is not None  # started before this job (the first) or during the last one
            progress(f"[{index + 1}/{len(jobs)}] checking {file.name} as drill {drill_id}")
            try:
                job = CheckJob(drill=drill_id, file=str(file.resolve()), timing=False)
                results.append(worker.run(asdict(job), CHECK_TIMEOUT_S))
            finally:
                worker.close()
    return results


def _said(result: CheckResult) -> str:
    if result.error is not None:
        where = result.error.location()
        return f"could not run: {result.error.kind}: {result.error.message}" + (f" ({where})" if where else "")
    verdict = "PASSED" if result.passed else "FAILED"
    codes = ", ".join(result.codes) or "no diagnosis"
    return f"{verdict} with {codes}"


def _expected(passes: bool, codes: tuple[str, ...]) -> str:
    return f"{'PASSED' if passes else 'FAILED'} with {', '.join(codes) or 'no diagnosis'}"


def _documented_codes(fixture: _Fixture, result: CheckResult) -> tuple[str, ...]:
    """What the fixture must say on the device its check ran on: a mistakes entry's
    ``gpu_codes`` where it has them and the check was compiled for a GPU."""
    gpu = result.device is not None and not result.device.interpreter
    if gpu and fixture.mistake is not None and fixture.mistake.gpu_codes is not None:
        return fixture.mistake.gpu_codes
    return fixture.codes


def matches(result: CheckResult, passes: bool, codes: tuple[str, ...]) -> bool:
    """Did a check say exactly this?  Info-level codes not listed in ``codes`` are ignored."""
    if result.error is not None or result.passed != passes:
        return False
    return codes_match(result.diagnosis, codes)


def _kernel_rows(drill: Drill, toml: Path, root: Path, fixtures: list[_Fixture], device: DeviceChoice,
                 progress: Callable[[str], None]) -> list[Row]:
    rows: list[Row] = []
    solution = root / "solutions" / drill.solution
    if not solution.is_file() or not (root / "drills" / drill.file).is_file():
        return rows  # the data rows already say which file is missing
    scratch = Path(tempfile.mkdtemp(prefix=f"flashtutor-devcheck-{drill.id}-"))
    try:
        runnable: list[_Fixture] = []
        jobs: list[tuple[str, Path]] = [(drill.id, solution)]
        for fixture in fixtures:
            mistake = fixture.mistake
            if fixture.label == "shipped" and fixture.file is not None:
                runnable.append(fixture)
                jobs.append((drill.id, fixture.file))
            elif mistake is not None:
                fixture.file = scratch / f"{mistake.stem}.py"
                fixture.file.write_text(mistake.text(drill, root), encoding="utf-8")
                runnable.append(fixture)
                jobs.append((drill.id, fixture.file))
        results = _run_checks(jobs, root, device, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    solved = results[0]
    ok = solved.error is None and solved.passed and not solved.diagnosis
    if ok:
        detail = f"PASSED with no diagnosis (max abs err {solved.max_abs_err:.2g} <= {solved.tolerance:g})"
    elif solved.error is None and solved.passed:
        detail = f"PASSED but says {', '.join(solved.codes)}: a solution must have no finding at all"
    else:
        detail = f"must PASS with no diagnosis; {_said(solved)}"
    where = _rel(solution, root)
    if solved.error is not None and solved.error.line:
        where = f"{where}:{solved.error.line}"
    rows.append(Row(drill.id, "solution", ok, detail, where))

    verified = set()
    for fixture, result in zip(runnable, results[1:], strict=True):
        if fixture.passes is None:
            said = [d.code for d in result.diagnosis]
            detail = f"undocumented; it says {_said(result)}"
            if result.error is None:
                codes = ", ".join(f'"{c}"' for c in said)
                detail += f": write [shipped] passes = {str(result.passed).lower()}, codes = [{codes}]"
            rows.append(Row(drill.id, fixture.label, False, detail, fixture.where))
            continue
        documented = _documented_codes(fixture, result)
        error_kind = next((c.removeprefix("error:") for c in documented if c.startswith("error:")), None)
        if (result.error is not None and result.error.kind == error_kind) if error_kind else matches(
                result, fixture.passes, documented):
            verified.add(fixture.label)
            rows.append(Row(drill.id, fixture.label, True, _said(result), fixture.where))
            continue
        detail = f"documented: {_expected(fixture.passes, documented)}; measured: {_said(result)}"
        if fixture.label == "shipped" and result.error is None and result.passed and not fixture.passes:
            detail = (f"the shipped file drills/{drill.file} PASSES: a drill ships with its lesson's step cut out "
                      f"(a TODO), so it must FAIL (documented: {_expected(fixture.passes, fixture.codes)})")
        elif fixture.label == "shipped":
            detail += f" - fix drills/{drill.file}, or write what it says into [shipped]"
        else:
            detail += " - fix the entry's edits or its codes"
        rows.append(Row(drill.id, fixture.label, False, detail, fixture.where))
    rows += _coverage_rows(drill, toml, root, fixtures, verified)
    return rows


# --- the whole check ------------------------------------------------------------------------


def run(root: Path | None = None, drill: str | None = None, quick: bool = False, device: DeviceChoice = "auto",
        progress: Callable[[str], None] | None = None) -> Report:
    """Check every drill under ``root`` (default: the content root), or the one ``drill`` names."""
    root = Path(root or content_root()).resolve()
    progress = progress or (lambda message: None)
    report = Report(root=str(root))
    files = drill_files(root)
    if not files:
        report.rows.append(Row("-", "data", False, "no drills/NN_slug.toml here", _rel(root / "drills", root)))
        return report
    parsed: list[tuple[Path, Drill | None]] = []
    for path in files:
        try:
            parsed.append((path, read_drill(path)))
        except tomllib.TOMLDecodeError as exc:
            parsed.append((path, None))
            report.rows.append(Row(path.stem[:2], "data", False, f"does not parse: {exc}",
                                   _at(path, root, _toml_error_line(exc))))
        except (KeyError, TypeError, ValueError) as exc:
            parsed.append((path, None))
            missing = f"the required key {exc} is missing" if isinstance(exc, KeyError) else str(exc)
            report.rows.append(Row(path.stem[:2], "data", False, f"{path.name}: {missing}", _rel(path, root)))
    if drill is not None:
        chosen = [(p, d) for p, d in parsed if _matches(drill, p, d)]
        if not chosen:
            raise UnknownDrill(f"no drill {drill!r} under {root / 'drills'}")
        keep = {p for p, _ in chosen}
        report.rows = [r for r in report.rows if any(r.drill == p.stem[:2] for p in keep)]
        parsed = chosen
    report.rows += _derived_rows(root)
    ids: dict[str, Path] = {}
    for path, found in parsed:
        if found is None:
            continue
        if found.id in ids:
            report.rows.append(Row(found.id, "data", False, f"id {found.id!r} is also used by {ids[found.id].name}",
                                   _rel(path, root)))
        ids[found.id] = path
        rows, fixtures = _data_rows(found, path, root)
        report.rows += rows
        if found.is_kernel and quick:  # every diagnosis code is expected by some fixture
            report.rows += _coverage_rows(found, path, root, fixtures, verified=None)
        elif found.is_kernel:  # ... and produced by one
            report.rows += _kernel_rows(found, path, root, fixtures, device, progress)
    return report


def render_table(report: Report) -> str:
    """The report as a plain-text table, failures last in each drill, and a summary line."""
    header = ("drill", "check", "ok", "detail")
    lines = []
    rows = [(r.drill, r.check, "ok" if r.ok else "FAIL", f"{r.where}: {r.detail}" if r.where else r.detail)
            for r in report.rows]
    width_drill = max(len(header[0]), *(len(r[0]) for r in rows)) if rows else 5
    width_check = max(len(header[1]), *(len(r[1]) for r in rows)) if rows else 5
    for cells in (header, *rows):
        lines.append(f"{cells[0]:<{width_drill}}  {cells[1]:<{width_check}}  {cells[2]:<4}  {cells[3]}")
    failed = len(report.failed)
    lines.append("")
    lines.append(f"dev check: {len(report.rows)} checks, "
                 + (f"{failed} FAILED" if failed else "all ok") + f" (content root {report.root})")
    return "\n".join(lines)
