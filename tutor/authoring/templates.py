"""Where ``flashtutor dev new --problem PROBLEM`` takes a new drill's files from.

One decision, here: a drill of an existing problem other than ``attention``
starts from that problem's *first* drill in the catalog (its solution is the
launcher contract the problem checks, its ``[diagnoses.*]`` tables are the
words for the codes the problem reports).  ``attention`` has its own teaching
template in :mod:`tutor.authoring.devnew`; a new problem gets that template for
its kernel and a problem module skeleton here, registered in ``PROBLEMS``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tutor.authoring.devnew import MARKER
from tutor.catalog import Drill, drill_tomls, read_drill
from tutor.harness.problems import PROBLEMS
from tutor.paths import PACKAGE_DIR

PROBLEMS_DIR = PACKAGE_DIR / "harness" / "problems"
_REGISTRY = re.compile(r"^PROBLEMS: dict\[str, str\] = \{\n(?P<body>(?:    .*\n)*)\}", re.M)


def is_known(problem: str) -> bool:
    return problem in PROBLEMS


def template_for(problem: str, root: Path) -> Drill | None:
    """The drill a new drill of ``problem`` is copied from: the first of that
    problem in ``root``'s catalog.  None for ``attention`` (its own template) and
    for a problem no drill uses yet."""
    if problem == "attention":
        return None
    return next((d for d in map(read_drill, drill_tomls(root)) if d.is_kernel and d.problem == problem), None)


def _header(drill_id: str, title: str, what: str) -> str:
    return (f'"""Drill {drill_id} — {title}.\n\n{MARKER} {what}\n'
            f"This file starts as a copy of a solved drill of the same problem: cut the lesson's\n"
            f"step out of it, leave a TODO that says what goes there, and check that it runs and\n"
            f"FAILS with finite, plausible numbers.\n\"\"\"\n")


def _without_docstring(source: str) -> str:
    """The module's source after its leading docstring."""
    match = re.match(r'\s*(?:[rRuU]?"""[\s\S]*?"""|[rRuU]?\'\'\'[\s\S]*?\'\'\')\n?', source)
    return source[match.end():] if match else source


def from_drill(template: Drill, root: Path, drill_id: str, slug: str) -> tuple[str, str, str, str]:
    """The new drill's kernel, TOML, solution and mistakes text, from ``template``."""
    title = slug.replace("_", " ").capitalize()
    body = _without_docstring((root / "solutions" / template.solution).read_text(encoding="utf-8"))
    body = body.replace(f'drill="{template.id}"', f'drill="{drill_id}"')  # check_this_file(..., drill=NN)
    kernel = _header(drill_id, title, "say what this drill teaches and what the student changes.") + body
    solution = _header(drill_id, f"{title}, solved", "explain the step the drill asks for.") + body
    toml_text = (root / "drills" / f"{template.name}.toml").read_text(encoding="utf-8")
    diagnoses = toml_text[toml_text.index("[diagnoses."):] if "[diagnoses." in toml_text else ""
    modes = ", ".join(f'"{m}"' for m in template.modes)
    toml = f'''# Drill {drill_id}: what it is, how it is checked, its hints and the words for each diagnosis.
# Started from drill {template.id} ({template.name}), the first drill of the {template.problem} problem:
# the diagnoses below are its words for the codes this problem reports; keep those your lesson needs.
id = "{drill_id}"
slug = "{slug}"
title = "{title}"
kind = "kernel"
file = "{drill_id}_{slug}.py"
solution = "{drill_id}_{slug}_solution.py"
competency = "{MARKER} the interview competency, in a few words"
teaches = """
{MARKER} what the student learns, in two or three sentences.
"""
summary = "{MARKER} README.md's drills table: what the student does, in one line"
shipped_summary = "{MARKER} drills/README.md's table: the file as shipped and its TODOs, in a few sentences"
# drill {template.id}'s tolerance; {MARKER} justify it for this drill's shapes and mistakes
tolerance = {template.tolerance}
problem = "{template.problem}"
modes = [{modes}]

# {MARKER} cut the step out of drills/{drill_id}_{slug}.py, then write what `flashtutor check {drill_id}` says
[shipped]
passes = false
codes = ["wrong-output"]

[[hints]]
title = "Where the TODO lives"
text = """
{MARKER} a gentle first hint, open from the start.
"""

{diagnoses}'''
    mistakes = (f"# Student-like kernels for drill {drill_id} (tutor/authoring/student_kernels.py describes the "
                f"format).\n# {MARKER} one entry per diagnosis code, producing exactly that code, and correct\n"
                f"# kernels written differently (passes = true); drill {template.id}'s "
                f"solutions/{template.name}.mistakes.toml shows the form.\n")
    return kernel, toml, solution, mistakes


SKELETON = '''"""The @PROBLEM@ problem: what its drills compute, and how the harness checks them.

@MARKER@ say what the kernel computes, its launcher's contract (arguments, shapes,
what it writes) and how a launch is checked.  tutor/harness/problems/__init__.py
describes each call; the attention problem (tutor/harness/problems/attention/)
and split_kv_decode.py are complete examples.
"""

from __future__ import annotations

from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness.problems import Correctness, ModuleProblem, Problem, TimedLaunches


def check_correctness(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                      shape: tuple[int, int, int, int] | None = None) -> Correctness:
    # @MARKER@ the verdict: launch the student's launcher on every case (fresh inputs from
    # `generator`, poisoned outputs), compare with a float64 reference, and return
    # Correctness(cases, shape, diagnose) with the read-outs in `diagnose`
    raise NotImplementedError("tutor/harness/problems/@PROBLEM@.py: check_correctness is not written yet")


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    # @MARKER@ the launches to time (and torch's baseline on a GPU), at a timing shape
    raise NotImplementedError("tutor/harness/problems/@PROBLEM@.py: timing_launches is not written yet")


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches)
'''


def problem_skeleton(problem: str, problems_dir: Path | None = None) -> dict[Path, str]:
    """The new problem's module and its registry with the new line (path -> text)."""
    folder = Path(problems_dir or PROBLEMS_DIR)
    registry = folder / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    match = _REGISTRY.search(text)
    if match is None:
        raise ValueError(f"{registry}: no `PROBLEMS: dict[str, str] = {{...}}` block to add {problem!r} to")
    line = f'    "{problem}": "tutor.harness.problems.{problem}",\n'
    registered = text[:match.end("body")] + line + text[match.end("body"):]
    module = SKELETON.replace("@PROBLEM@", problem).replace("@MARKER@", MARKER)
    return {folder / f"{problem}.py": module, registry: registered}
