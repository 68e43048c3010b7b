"""Reading out the D term of each loop of a student's backward (drill 04, diagnosis phase).

The backward is linear in dO, and every term of dS = P ∘ (dP − D) can be switched
on alone.  One probe launch, at a failing case's own shape with its own q, k and
lse (the same dtypes and ints, so it reuses the variant the case compiled), gets
V = 0 and a one-hot dO: ``dO[r0 + c, c] = 1`` on the last
``R = min(seq, head_dim)`` rows and 0 elsewhere, and O = 2 there with a 3 in the next
column (``O[r0 + c, c] = 2, O[r0 + c, c + 1] = 3``).  Then dP = dO Vᵀ = 0 and
D = rowsum(dO ∘ O) = 2 on those rows (0 elsewhere) -- where rowsum(O ∘ O) = 13,
rowsum(dO ∘ dO) = rowsum(dO) = 1 and rowsum(O) = 5, so a D from the wrong tensors
shows as another factor -- and the true

    dS = −2 P on rows R,   dQ_i = −2 scale (P K)_i,   dK_j = −2 scale Σ_{i∈R} P_ij Q_i

and dV = Pᵀ dO (not used here).  What each loop returns is compared with that:

* dQ on rows R, row by row, as α_i · (−2 scale (P K)_i): α = 1 everywhere is a
  dQ loop whose P, D term and scale are right (so a wrong dQ comes from its dP
  term); one α ≠ 1 for every row is the D term (or its scale) off by that factor;
  a different α per row is a P off by one factor per row (the lse it subtracts);
  dQ ∝ (P' K) with P' = exp(a s) (a ≠ 1) is a scale or base in its exponent, and
  P' masked otherwise (no mask, the diagonal masked) is its mask.
* dK as c · (−2 scale Σ P_ij Q_i): the same for the dK/dV loop (one factor).

Everything is float64 on the tensors' device; a shape is said only when it
explains every measured row within FIT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

FIT = 0.03  # a row is explained when its residual is below this fraction of its size


@dataclass
class DTermRead:
    rows: list[int]  # the rows that carry the one-hot dO
    dq: torch.Tensor  # (bh, N, d) float64: the student's dQ for the probe
    dk: torch.Tensor  # (bh, N, d) float64: the student's dK for the probe


D_TRUE = 2.0  # rowsum(dO * O) on the probe rows


def probe_inputs(v: torch.Tensor, do: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """(V = 0, O, the one-hot dO, the rows) of ``v``'s and ``do``'s shapes and dtypes."""
    seq, head_dim = do.shape[-2], do.shape[-1]
    count = min(seq, head_dim)
    r0 = seq - count
    one_hot, o = torch.zeros_like(do), torch.zeros_like(do)
    cols = torch.arange(count, device=do.device)
    one_hot[..., r0 + cols, cols] = 1.0
    o[..., r0 + cols, cols] = D_TRUE
    o[..., r0 + cols, (cols + 1) % head_dim] = 3.0
    return torch.zeros_like(v), o, one_hot, list(range(r0, seq))


def head_scale(do: torch.Tensor) -> torch.Tensor:
    """(batch, heads, 1, 1): 1, 2, 3, ... one per (batch, head) program, in dO's dtype."""
    count = do.shape[0] * do.shape[1]
    return torch.arange(1, count + 1, dtype=do.dtype, device=do.device).reshape(do.shape[0], do.shape[1], 1, 1)


def read_d_term(backward: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                v: torch.Tensor, do: torch.Tensor, per_head: bool = False) -> DTermRead | None:
    """One probe launch: ``backward(v, o, do)`` returns the student's (dQ, dK) for those
    tensors (the caller's closure launches at the case's shape).  None when not finite.
    ``per_head``: the one-hot dO of (batch, head) program n is scaled by n + 1
    (:func:`head_scale`), so each program's true D -- and D term -- differs: a loop that
    uses another program's D shows it (:func:`head_factors`)."""
    v0, o, one_hot, rows = probe_inputs(v, do)
    if per_head:
        one_hot = one_hot * head_scale(do)
    dq, dk = backward(v0, o, one_hot)
    dq64, dk64 = (t.to(torch.float64).reshape(-1, *t.shape[-2:]) for t in (dq, dk))
    if not bool(torch.isfinite(dq64).all() and torch.isfinite(dk64).all()):
        return None
    return DTermRead(rows=rows, dq=dq64, dk=dk64)


@dataclass
class LoopShape:
    """What one loop's D-term read-out measurably is."""

    right: bool  # within FIT of the true one
    zero: bool  # the loop's gradient is ~0 where the D term alone should move it
    factor: float | None  # one factor for every row (or the whole of dK) explains it
    per_row: tuple[float, float] | None  # (min, max) of a per-row factor, when that and only that explains dQ
    slope: float | None  # P' = exp(a s) explains dQ with this a != 1
    mask: str | None  # "no causal mask" / "the diagonal masked": the mask that explains dQ
    per_row_named: str = ""  # where the per-row factor is one a known read gives on every row, that read in words


def _rows_fit(got: torch.Tensor, model: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-row least-squares factors α (bh, R) of ``got`` ≈ α · ``model`` and the worst
    residual relative to the row's size."""
    norm = (model * model).sum(-1)
    alpha = (got * model).sum(-1) / norm.clamp(min=1e-30)
    size = torch.maximum(got.norm(dim=-1), model.norm(dim=-1) * alpha.abs()).clamp(min=1e-12)
    resid = (got - alpha[..., None] * model).norm(dim=-1) / size
    return alpha, float(resid.amax())


def _p(s: torch.Tensor, rule: torch.Tensor, slope: float = 1.0) -> torch.Tensor:
    """exp(slope · s) on the allowed pairs, each row divided by its own maximum (a row
    factor is fitted apart)."""
    a = (slope * s).masked_fill(~rule, float("-inf"))
    top = a.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return torch.exp(a - top)


def dq_model(read: DTermRead, s: torch.Tensor, lse: torch.Tensor, allowed: torch.Tensor,
             k: torch.Tensor) -> torch.Tensor:
    """The right dQ on the probe rows, (bh, R, d): −2 scale (P K) with the true P."""
    seq, head_dim = s.shape[-1], k.shape[-1]
    rows = torch.tensor(read.rows, device=s.device)
    s_r = s.reshape(-1, seq, seq)[:, rows]
    lse_r = lse.reshape(-1, seq)[:, rows]
    ok = allowed[rows][None].expand_as(s_r)
    p = torch.where(ok, torch.exp(s_r - lse_r[..., None]), torch.zeros((), dtype=s.dtype, device=s.device))
    model: torch.Tensor = -D_TRUE * head_dim**-0.5 * (p @ k.to(torch.float64).reshape(-1, seq, head_dim))
    return model


def dk_model(read: DTermRead, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The right dK, (bh, N, d): −2 scale Σ_{i∈R} P_ij Q_i with the true P."""
    seq, head_dim = p.shape[-1], q.shape[-1]
    rows = torch.tensor(read.rows, device=p.device)
    p_r = p.reshape(-1, seq, seq)[:, rows]
    q_r = q.to(torch.float64).reshape(-1, seq, head_dim)[:, rows]
    model: torch.Tensor = -D_TRUE * head_dim**-0.5 * (p_r.transpose(-1, -2) @ q_r)
    return model


def head_factors(got: torch.Tensor, model: torch.Tensor, scales: torch.Tensor) -> list[float] | None:
    """Per (batch, head) program n, the factor α_n of ``got`` ≈ α_n · (n + 1) · ``model``
    (a per-head probe, :func:`read_d_term`); None where one factor per program does not
    explain its gradient within FIT."""
    got, model = got.reshape(got.shape[0], -1), model.reshape(model.shape[0], -1) * scales.reshape(-1, 1)
    norm = (model * model).sum(-1)
    if bool((norm == 0).any()):
        return None
    alpha = (got * model).sum(-1) / norm
    size = torch.maximum(got.norm(dim=-1), model.norm(dim=-1) * alpha.abs()).clamp(min=1e-12)
    if float(((got - alpha[:, None] * model).norm(dim=-1) / size).amax()) > FIT:
        return None
    return [float(a) for a in alpha]


def heads_words(alphas: list[float], grad: str) -> str:
    """What a per-head probe of one loop says, where a program's gradient is not its own
    head's ("" where every program's is): each factor that is another program's scale
    over its own names that program's D."""
    wrong = [(n, a) for n, a in enumerate(alphas) if abs(a - 1) > FIT]
    if not wrong:
        return ""
    named = []
    for n, a in wrong:
        source = next((j for j in range(len(alphas)) if abs(a - (j + 1) / (n + 1)) <= FIT * abs(a)), None)
        named.append(f"program {n}: {a:.3g}x" + ("" if source is None else f", what program {source}'s D gives"))
    listed = "; ".join(named[:4]) + ("; ..." if len(named) > 4 else "")
    return (f"with dO scaled by n + 1 on (batch, head) program n (so D differs per program) its {grad} is not"
            f" each program's own ({listed}): the D it uses is not the program's own -- check the (batch, head)"
            " offset of the D (delta) load, and of the O and dO loads that compute D")


def per_program_words(read: DTermRead, grad: str, s: torch.Tensor, lse: torch.Tensor, allowed: torch.Tensor,
                      p: torch.Tensor, q: torch.Tensor, k: torch.Tensor, do: torch.Tensor) -> str | None:
    """Where the plain probe reads one loop ``grad`` ("dq" or "dk") right, what the per-program
    probe ``read`` (D different per program) says of it: None where each program's D is its
    own (the plain words stand), the words where it is not, "" where no one factor per
    program explains its gradient (nothing is said of that loop)."""
    model = dq_model(read, s, lse, allowed, k) if grad == "dq" else dk_model(read, p, q)
    got = read.dq[:, torch.tensor(read.rows)] if grad == "dq" else read.dk
    alphas = head_factors(got, model, head_scale(do).reshape(-1).to(torch.float64))
    if alphas is None:
        return ""
    return heads_words(alphas, "dQ" if grad == "dq" else "dK") or None


def describe_dq(read: DTermRead, s: torch.Tensor, lse: torch.Tensor, allowed: torch.Tensor,
                k: torch.Tensor, visited: torch.Tensor | None = None) -> LoopShape:
    """The dQ loop's D term against −2 scale (P K) on the probe rows.  ``s``: true scaled
    scores (..., N, N) float64, ``lse`` true lse (..., N), ``allowed`` (N, N) bool,
    ``visited`` (bh, N, N) bool: the (row, key) pairs of the blocks the dQ loop visited."""
    seq, head_dim = s.shape[-1], k.shape[-1]
    scale = head_dim**-0.5
    rows = torch.tensor(read.rows, device=s.device)
    s_r = s.reshape(-1, seq, seq)[:, rows]
    k64 = k.to(torch.float64).reshape(-1, seq, head_dim)
    ok = allowed[rows][None].expand_as(s_r)
    model, got = dq_model(read, s, lse, allowed, k), read.dq[:, rows]
    size = float(model.norm(dim=-1).amax())
    shape = LoopShape(right=False, zero=False, factor=None, per_row=None, slope=None, mask=None)
    alpha, resid = _rows_fit(got, model)
    if resid <= FIT and float((alpha - 1).abs().amax()) <= FIT:
        shape.right = True
        return shape
    if float(got.norm(dim=-1).amax()) <= 0.02 * size:
        shape.zero = True
        return shape
    if resid <= FIT:
        lo, hi = float(alpha.amin()), float(alpha.amax())
        if hi - lo <= FIT * max(abs(hi), abs(lo)):
            shape.factor = float(alpha.mean())
        else:
            shape.per_row = (lo, hi)
            shape.per_row_named = _per_row_source(alpha, lse.reshape(-1, seq)[:, rows])
        return shape
    # the exponent's slope, and the mask, with one factor per row fitted apart
    best: tuple[float, float] | None = None
    for a in torch.logspace(-1.5, 1.5, 121, base=10.0, dtype=torch.float64).tolist():
        _, r = _rows_fit(got, -scale * (_p(s_r, ok, a) @ k64))
        if best is None or r < best[1]:
            best = (a, r)
    if best is not None and best[1] <= FIT and abs(best[0] - 1) > 0.05:
        shape.slope = best[0]
        return shape
    diagonal = rows[:, None] == torch.arange(seq, device=s.device)[None, :]
    rules = [("no causal mask", torch.ones_like(ok)), ("the diagonal masked", ok & ~diagonal[None])]
    if visited is not None:
        seen = visited[:, rows]
        extra, cut = bool((seen & ~ok).any()), bool((ok & ~seen).any())
        words = {"no causal mask inside the blocks the loop visits": extra,
                 "nothing from the key blocks the loop skipped (its bound cuts them)": cut}
        rules.append((" and ".join(w for w, on in words.items() if on), seen))
        if extra and cut:
            rules.append(("nothing from the key blocks the loop skipped (its bound cuts them)", ok & seen))
    for name, rule in rules:
        if bool((rule != ok).any()):
            _, r = _rows_fit(got, -scale * (_p(s_r, rule) @ k64))
            if r <= FIT:
                shape.mask = name
                return shape
    return shape


def _per_row_source(alpha: torch.Tensor, lse: torch.Tensor) -> str:
    """The read a per-row factor ``alpha`` of the dQ probe (D = 2 on every row) is, where it is
    one on every row within FIT, against each row's true ``lse`` (natural units): D read from
    the LSE tensor (alpha = lse / 2), or lse and D swapped (P = exp(s - 2) = P exp(lse - 2), D =
    lse: alpha = exp(lse - 2) lse / 2); "" otherwise (blind round 22, 04/m12, m41)."""
    reads = {
        "the dQ loop's D is each row's lse (alpha = lse / 2 on every row): its D is loaded from LSE where"
        " Delta belongs": lse / D_TRUE,
        "the dQ loop subtracts D where the lse belongs and uses the lse as D (alpha = exp(lse - 2) lse / 2 on"
        " every row): its lse and D loads are swapped": torch.exp(lse - D_TRUE) * lse / D_TRUE,
    }
    for words, want in reads.items():
        if bool(((alpha - want).abs() <= FIT * want.abs().clamp(min=1e-6)).all()):
            return words
    return ""


def describe_dk(read: DTermRead, p: torch.Tensor, q: torch.Tensor) -> LoopShape:
    """The dK/dV loop's D term: dK against −2 scale Σ_{i∈R} P_ij Q_i, one factor for all.
    ``p``: the true P (..., N, N) float64."""
    model, got = dk_model(read, p, q), read.dk
    shape = LoopShape(right=False, zero=False, factor=None, per_row=None, slope=None, mask=None)
    size = float(model.norm())
    if size == 0.0:
        return shape
    c = float((got * model).sum()) / size**2
    resid = float((got - c * model).norm()) / max(size * abs(c), float(got.norm()), 1e-12)
    if resid <= FIT and abs(c - 1) <= FIT:
        shape.right = True
    elif float(got.norm()) <= 0.02 * size:
        shape.zero = True
    elif resid <= FIT:
        shape.factor = c
    return shape


D_FORMS = {6.5: "rowsum(O * O)", 0.5: "rowsum(dO * dO) or rowsum(dO)", 2.5: "rowsum(O)"}  # / the true 2


def factor_words(c: float, head_dim: int, loop: str) -> str:
    """A factor c on a loop's D-term read-out (dP = 0, D = 2, so the right dS is -2 P) and what it
    equals, where it equals a known one."""
    scale = head_dim**-0.5
    whole_ds = {-1.0: f"-1: {loop}'s D term has its sign flipped, or the whole of its dS has",
                -0.5: (f"-1/2 = -1/D: here dS = -D P, so {loop} accumulates P where dS belongs, or its D term"
                       " is off by that factor")}
    for value, words in whole_ds.items():
        if abs(c - value) <= 0.02 * abs(value):
            return f"{c:.3g} times the right one ({words})"
    known = {scale: f"sm_scale = 1/sqrt({head_dim}): a scale applied once more",
             1 / scale: f"sqrt({head_dim}): sm_scale left out"}
    known.update({value: f"what D = {form} gives here, where rowsum(dO * O) = 2" for value, form in D_FORMS.items()})
    meaning = next((f" ({words})" for value, words in known.items() if abs(c - value) <= 0.02 * abs(value)), "")
    return (f"{c:.3g} times the right one{meaning}: {loop}'s D term, or the scale it is multiplied by, is off by"
            " that factor")


PROBE = "with V = 0 (so dP = 0) and a one-hot dO on rows {rows}, where D = 2"


def dq_words(shape: LoopShape, head_dim: int) -> str:
    """One sentence on the dQ loop's D-term read-out; "" where it measured nothing sure."""
    if shape.right:
        return ("its dQ is right: the dQ loop's P, D and scale are, so what is wrong is its dP = dO V^T term"
                " (or how dP enters dS)")
    if shape.zero:
        return ("its dQ is 0 where it should be -2 sm_scale (P K): in the dQ loop the D term does not reach dQ"
                " (D left out of dS or replaced by a quantity that is 0 here, such as the tile's own rowsum(P dP),"
                " or dS multiplied by a tensor that is 0 here, such as V, instead of K)")
    if shape.factor is not None:
        return f"its dQ is {factor_words(shape.factor, head_dim, 'the dQ loop')}"
    if shape.per_row is not None:
        lo, hi = shape.per_row
        said = (f"its dQ has the right direction on every row but is {lo:.3g}-{hi:.3g} times the right one, one"
                " factor per row: the dQ loop's P (the lse it subtracts) or its D is not the row's own")
        return said + (f"; measured against each row's lse, {shape.per_row_named}" if shape.per_row_named else "")
    if shape.slope is not None:
        return (f"its dQ is what P = exp({shape.slope:.3g} s) gives, where exp(s - lse) grows as exp(s): the"
                " dQ loop's P has its scale or base off by that factor")
    if shape.mask is not None and shape.mask.startswith("nothing"):
        return ("its dQ is what P gives without the key blocks the dQ loop never visited, right on the rest:"
                " its loop skips key blocks it needs (its bound, its start, or a step larger than the keys it"
                " loads)")
    if shape.mask is not None:
        return f"its dQ is what P with {shape.mask} gives: the dQ loop's P has the wrong mask"
    return ""


def dk_words(shape: LoopShape, head_dim: int) -> str:
    """One sentence on the dK/dV loop's D-term read-out; "" where it measured nothing sure."""
    if shape.right:
        return ("its dK is right: the dK/dV loop's dS with dP = 0, D and scale are, so what is wrong is its"
                " dP = dO V^T term (or how dP enters dS)")
    if shape.zero:
        return ("its dK is 0 where it should be -2 sm_scale P^T Q: in the dK/dV loop the D term does not reach"
                " dK (D left out of dS or replaced by a quantity that is 0 here, such as the tile's own"
                " rowsum(P dP), or dS multiplied by a tensor that is 0 here instead of Q)")
    if shape.factor is not None:
        return f"its dK is {factor_words(shape.factor, head_dim, 'the dK/dV loop')}"
    return ""
