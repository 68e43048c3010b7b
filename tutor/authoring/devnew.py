"""``flashtutor dev new NAME``: scaffold a kernel drill that ``dev check`` guides to completion.

It writes, with the next free id NN:

* ``drills/NN_NAME.py`` — a working tiled attention forward (the ``attention``
  problem's launcher contract, visits recorded) with ``AUTHOR:`` markers where
  the lesson's step is to be cut out and replaced by a student's TODO;
* ``drills/NN_NAME.toml`` — the drill's data, every value to fill marked
  ``AUTHOR:``;
* ``solutions/NN_NAME_solution.py`` — the same kernel, complete (it passes);
* ``solutions/NN_NAME.mistakes.toml`` — one student-like kernel (the final
  division removed) as the first fixture.

A fresh scaffold is *meant* to fail ``flashtutor dev check``: each ``AUTHOR:``
marker is a row that says what to write, and the shipped file, which still
passes, is a row that says to cut the lesson's step out of it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tutor.paths import content_root

MARKER = "AUTHOR:"  # a placeholder dev check reports until it is gone
NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


class ScaffoldError(ValueError):
    """The drill cannot be scaffolded (bad name, taken id, files already there)."""


KERNEL = '''"""Drill @ID@ — @TITLE@.

AUTHOR: say what this drill teaches and what the student changes (a few sentences).
As scaffolded this file is the complete kernel (a tiled
attention forward, full attention): cut the lesson's step out of it, leave a
TODO that says what goes there, and check that the file still runs and FAILS
with finite, plausible numbers (`python drills/@NAME@.py`).
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # query rows per program
BLOCK_N = 64  # keys per step of the loop


@triton.jit
def _attn_fwd(
    Q, K, V, Out, Visits,  # q/k/v/out: (batch*heads, seq, head_dim), contiguous
    sm_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor counts visited blocks
):
    # -- this program's tile: query block start_m of (batch, head) off_bh -------------
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX  # rows past the end of the sequence are computed but never stored

    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # -- running softmax state, fp32: nothing seen yet ---------------------------------
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # fold log2(e) into the scale and use exp2

    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        qk = tl.dot(q, k) * qk_scale  # scores in log2 units
        qk = tl.where(col_ok[None, :], qk, float("-inf"))  # keys past the end get weight 0

        # -- online softmax update: rescale what was summed when the maximum moves -------
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

        # -- bookkeeping for the tutor: mark (query block, key block) as visited ---------
        if RECORD_VISITS:
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)

    # -- epilogue: one division turns the weighted sum into an average -------------------
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=row_ok[:, None])


def attention(q, k, v, out=None, visits=None):
    """Full softmax(q k^T / sqrt(d)) v for fp16 (batch, heads, seq, head_dim).

    ``out`` (optional) receives the result; ``visits`` (optional, int32, shape
    (batch*heads, cdiv(seq, BLOCK_M), cdiv(seq, BLOCK_N)), zeroed) gets a 1 for
    every (query block, key block) pair the kernel visits.
    """
    batch, heads, seq, head_dim = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)  # one program per (query block, batch*head)
    _attn_fwd[grid](
        q, k, v, out, visits if visits is not None else out,
        head_dim**-0.5, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="@ID@")
'''

TOML = '''# Drill @ID@: what it is, how it is checked, its hints and the words for each diagnosis.
# docs/DRILLS.md describes every key; `flashtutor dev check --drill @ID@` says what is left to do.
id = "@ID@"
slug = "@SLUG@"
title = "@TITLE@"
kind = "kernel"
file = "@NAME@.py"
solution = "@NAME@_solution.py"
competency = "AUTHOR: the interview competency, in a few words"
teaches = """
AUTHOR: what the student learns, in two or three sentences.
"""
# one line each for the generated drill tables (`flashtutor dev sync`)
summary = "AUTHOR: README.md's drills table: what the student does, in one line"
shipped_summary = "AUTHOR: drills/README.md's table: the file as shipped and its TODOs, in a few sentences"
# The harness's max abs error against a float64 reference, fp16 inputs: the
# solution's error is about 1e-3 on the CPU shapes; 0.02 leaves room for fp16
# rounding and none for a real mistake. AUTHOR: justify it for this drill.
tolerance = 0.02
problem = "@PROBLEM@"
modes = ["full"]

# What a check of the shipped drill file says: once the lesson's step is cut out of
# drills/@NAME@.py, write here what `flashtutor check @ID@` reports for it.
# AUTHOR: cut the step out of drills/@NAME@.py, then write its codes below.
[shipped]
passes = false
codes = ["wrong-output"]

[[hints]]
title = "Where the TODO lives"
text = """
AUTHOR: a gentle first hint, open from the start.
"""

[[hints]]
title = "Nearly the answer"
unlock_codes = ["wrong-output"]
after_attempts = 4
text = """
AUTHOR: the step, nearly written out.
"""

[diagnoses.wrong-output]
severity = "error"
message = """
The output matches neither the reference nor any of the usual mistakes the
tutor knows. Start from the largest error it reports.
"""
'''

SOLUTION_HEAD = '''"""Drill @ID@ — @TITLE@, solved.

AUTHOR: explain the step the drill asks for, as the Triton tutorial would.

Run it as ``python solutions/@NAME@_solution.py``.
"""
'''

MISTAKES = '''# Student-like kernels for drill @ID@ (tutor/authoring/student_kernels.py describes the format).
# One entry per diagnosis code, producing exactly that code, and at least two
# correct kernels written differently (passes = true, no codes).

[[mistake]]
name = "no_final_division"
base = "solution"
says = "the final division by l_i is removed"
codes = ["wrong-output"]
passes = false
[[mistake.edit]]
find = "    acc = acc / l_i[:, None]\\n"
replace = ""

[[mistake]]
name = "blocks_of_32"
base = "solution"
says = "query blocks of 32 rows instead of 64"
passes = true
[[mistake.edit]]
find = "BLOCK_M = 64  # query rows per program\\n"
replace = "BLOCK_M = 32  # query rows per program\\n"
'''


def _fill(template: str, drill_id: str, slug: str, problem: str = "attention") -> str:
    title = slug.replace("_", " ").capitalize()
    return (template.replace("@NAME@", f"{drill_id}_{slug}").replace("@ID@", drill_id)
            .replace("@SLUG@", slug).replace("@TITLE@", title).replace("@PROBLEM@", problem))


def next_id(root: Path) -> str:
    taken = [int(p.name[:2]) for p in (root / "drills").glob("[0-9][0-9]_*") if p.name[:2].isdigit()]
    return f"{max(taken, default=0) + 1:02d}"


def scaffold(name: str, root: Path | None = None, drill_id: str | None = None, problem: str = "attention",
             problems_dir: Path | None = None) -> list[Path]:
    """Write the files of a new drill; returns their paths (the drill file first).

    ``problem`` is what the kernel computes.  ``attention`` (the default) gets the
    tiled-attention template above.  Another problem of
    :data:`tutor.harness.problems.PROBLEMS` gets its first drill as the template
    (:mod:`tutor.authoring.templates`): that drill's solution, launcher contract
    and diagnosis words.  A new name also gets a problem module skeleton in
    ``problems_dir`` (default: the package's ``tutor/harness/problems``), registered
    in its ``PROBLEMS``; every part to write carries an ``AUTHOR:`` marker."""
    from tutor.authoring import derived, templates

    root = Path(root or content_root())
    if not NAME.match(name):
        raise ScaffoldError(f"{name!r}: a drill name is lower-case words joined by _ (e.g. alibi_bias)")
    if not NAME.match(problem):
        raise ScaffoldError(f"{problem!r}: a problem name is lower-case words joined by _ (e.g. paged_decode)")
    if not (root / "drills").is_dir() or not (root / "solutions").is_dir():
        raise ScaffoldError(f"{root} holds no drills/ and solutions/: not a content root")
    drill_id = drill_id or next_id(root)
    if not re.fullmatch(r"\d\d", drill_id):
        raise ScaffoldError(f"{drill_id!r}: an id is two digits, e.g. 07")
    taken = sorted(p.name for p in (root / "drills").glob(f"{drill_id}_*"))
    if taken:
        raise ScaffoldError(f"id {drill_id} is taken by drills/{taken[0]}")
    stem = f"{drill_id}_{name}"
    template = templates.template_for(problem, root)
    if template is None:  # the attention template, for attention or a new problem
        kernel = _fill(KERNEL, drill_id, name, problem)
        toml = _fill(TOML, drill_id, name, problem)
        solution = _fill(SOLUTION_HEAD, drill_id, name) + kernel.split('"""\n', 1)[1]
        mistakes = _fill(MISTAKES, drill_id, name)
    else:
        kernel, toml, solution, mistakes = templates.from_drill(template, root, drill_id, name)
    files = {
        root / "drills" / f"{stem}.py": kernel,
        root / "drills" / f"{stem}.toml": toml,
        root / "solutions" / f"{stem}_solution.py": solution,
        root / "solutions" / f"{stem}.mistakes.toml": mistakes,
    }
    new_problem = template is None and problem != "attention" and not templates.is_known(problem)
    if new_problem:
        if problems_dir is None and not derived.owns_manifest(root):
            raise ScaffoldError(f"{problem!r} is a new problem: its module goes into the package "
                                f"(tutor/harness/problems/), so scaffold it in the package's own clone, not {root}")
        files.update(templates.problem_skeleton(problem, problems_dir))
    for path in files:
        if path.exists() and not (new_problem and path.name == "__init__.py"):
            raise ScaffoldError(f"{path} exists already")
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)
