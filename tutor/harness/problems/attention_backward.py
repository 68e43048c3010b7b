"""Attention's backward pass (drill 04).

The launcher contract (documented in ``drills/04_flash_backward.py`` and its TOML):

* ``attention_forward(q, k, v, causal=False) -> (o, lse)`` — o fp16 like q;
  lse fp32 (batch, heads, seq), the natural log of sum_j exp(q_i . k_j / sqrt(d));
* ``attention_backward(q, k, v, o, lse, do, causal=False, dq=, dk=, dv=,
  dkdv_visits=, dq_visits=) -> (dq, dk, dv)`` — writes into the given fp16
  outputs (or returns its own); the visit tensors (int32, zeroed) get a 1 for
  every block pair each loop visits: ``dkdv_visits[bh, key block, query block]``
  and ``dq_visits[bh, query block, key block]``.

Each correctness case runs the *student's* forward on fresh standard-normal
fp16 q, k, v (so the pair is checked as a student would use it), checks its O
against float64 (a changed forward is said, not blamed on the backward; lse goes
from the student's forward to their backward as it is), then runs the backward with a fresh
random dO into poisoned dQ, dK, dV buffers (with guard regions) and compares each gradient with torch autograd
in float64.  The case's error is the largest of the three.

A fourth case, ``hostile`` (:func:`hostile_case`: one head, seq 128, a whole
number of blocks), has scores of 120-150, where exp of a raw score overflows
fp32; each of its gradient elements is held to its own allowance
(:func:`allowances`, derived there), its error reported in the tolerance's
units.  It is diagnosed only when every standard case passed
(``large-scores-overflow``, ``large-scores-wrong``).

The diagnosis is derived from what the gradients measurably are:

* which of dQ, dK, dV are wrong, in which mode (full / causal);
* dV = Pᵀ dO depends on nothing but P: dV right means P (its recomputation and
  its mask) is right; dV wrong is explained only by a P that reproduces it
  (from a tile maximum instead of lse, with a mixed-up scale, with the causal
  mask missing on the pairs the recorded visits say were computed);
* with dV right, the dQ error is fitted row by row as ``-δ_i · (P K)_i / √d``,
  which is exactly what a wrong D_i does (dS = P ∘ (dP − D)): when the fit is
  exact, the student's D is D + δ, and its value says whether D is zero or a
  rowsum of the wrong tensors;
* a gradient that is a constant multiple of the right one: the ratio says
  whether it is the missing 1/√d;
* dK or dV equal to the contribution of a single query block: not summed over
  the dK/dV loop.

* dV wrong and none of the above: the P the dK/dV loop uses is read out through
  dV with one-hot dO, one probe launch per failing case at its own shape
  (:mod:`backward_readout`): a per-row factor is an lse not the row's own
  (``p-rows-wrong``, and whose), a per-key-block factor an lse indexed by key,
  a slope a wrong scale or base, zero or extra weight on pairs the mask;
* a D that is c x rowsum(dO*O) or a sum down the block's rows, and whether dK
  agrees (both loops); a dK whose error is exactly another D in the dK/dV loop,
  fitted row by row;
* NaN/Inf: which gradients, rows and keys, so which loop, and whether they are
  exactly the rows (keys) whose scores pass exp's fp32 range, or the keys of the tiles
  the dK/dV loop visited where a pair the mask removes scores past it above its lse;
  on ordinary scores the case is run again with q divided by 8, then 64, and where the
  gradients are finite there the dK/dV loop's P read out through dV gives its slope.

Anything these do not explain is reported as which gradient is wrong, and
where to look.  ``p-rows-wrong`` is said only when every failing case is explained so.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.findings import (
    Findings,
    drop_explained_nan,
    matches,
    visit_findings,
    worded,
)
from tutor.harness.numerics import LN2, LOG2E
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems import backward_ds_readout as dterm
from tutor.harness.problems import backward_readout as readout
from tutor.harness.problems.attention import value_rows
from tutor.harness.problems.attention.cases import block_visit_map, ideal_visits
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, VisitMap
from tutor.harness.shapes import plan_for

FORWARD = "attention_forward"
BACKWARD = "attention_backward"
GRADS = ("dq", "dk", "dv")


# ------------------------------------------------------------------------------------
# the float64 reference
# ------------------------------------------------------------------------------------
@dataclass
class Reference:
    s: torch.Tensor  # scaled scores, unmasked (bh..., N, N)
    allowed: torch.Tensor  # (N, N) bool: may row r see key c
    lse: torch.Tensor
    p: torch.Tensor  # probabilities, 0 where not allowed
    o: torch.Tensor
    grads: dict[str, torch.Tensor]  # dq, dk, dv
    ds: torch.Tensor


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, causal: bool) -> Reference:
    """O, lse, P and the gradients of O = softmax(q kᵀ/√d) v for upstream ``do``, in float64.

    The backward is written out (no autograd graph; issue 20): dV = Pᵀ dO, dP = dO Vᵀ,
    D = rowsum(dO ∘ O), dS = P ∘ (dP − D), dQ = scale dS K, dK = scale dSᵀ Q, with P = 0
    on the pairs the causal mask removes (tests/test_drill04_reference.py holds it to autograd)."""
    q64, k64, v64, do64 = (t.detach().to(torch.float64) for t in (q, k, v, do))
    seq, head_dim = q.shape[-2], q.shape[-1]
    scale = head_dim**-0.5
    idx = torch.arange(seq, device=q.device)
    allowed = (idx[:, None] >= idx[None, :]) if causal else torch.ones(seq, seq, dtype=torch.bool, device=q.device)
    s = (q64 @ k64.transpose(-1, -2)) * scale
    masked = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(masked, dim=-1)
    p = torch.exp(masked - lse[..., None])
    o = p @ v64
    dv = p.transpose(-1, -2) @ do64
    dp = do64 @ v64.transpose(-1, -2)
    ds = p * (dp - (do64 * o).sum(-1, keepdim=True))
    dq = (ds @ k64) * scale
    dk = (ds.transpose(-1, -2) @ q64) * scale
    return Reference(s=s, allowed=allowed, lse=lse, p=p, o=o, grads={"dq": dq, "dk": dk, "dv": dv}, ds=ds)


# ------------------------------------------------------------------------------------
# one launch
# ------------------------------------------------------------------------------------
@dataclass
class BackwardLaunch:
    case: CaseResult
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    do: torch.Tensor
    o: torch.Tensor  # the student's forward output
    lse: torch.Tensor
    grads: dict[str, torch.Tensor]  # the student's dq, dk, dv (fp16)
    ref: Reference
    forward_ok: bool
    forward_detail: str
    per_grad_err: dict[str, float | None]
    unwritten: dict[str, int]
    nonfinite: dict[str, int]
    out_of_bounds: dict[str, bool]
    dkdv_visits: torch.Tensor
    dq_visits: torch.Tensor
    guarded: shared.Guarded | None = None  # the backward's tensors, each inside a guard band
    # where the launch with visit maps failed and the same inputs without them passed: the
    # former's error per gradient (the case is judged by the latter); empty otherwise
    with_maps_err: dict[str, float | None] = field(default_factory=dict)
    failed_without_maps: bool = False  # it failed with the maps, and again without them


GRAD_BANDS = {"dq": "dQ", "dk": "dK", "dv": "dV"}  # each gradient's guard band, by the name the report uses
INPUT_BANDS = ("Q", "K", "V", "O", "dO", "lse")  # the backward's inputs, in the launcher's order
MAP_BANDS = ("dK/dV visit map", "dQ visit map")  # the visit maps' bands (dkdv_visits, dq_visits)


def _margin(t: torch.Tensor, block: int) -> int:
    return guarding.margin_elements(tuple(t.shape), 2 * block)


def run_forward(module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's forward on q, k, v inside NaN guard bands (its o and lse are its own)."""
    guarded = shared.Guarded()
    block = max(int(getattr(module, "BLOCK_M", 0) or 0), int(getattr(module, "BLOCK_N", 0) or 0))
    views = [guarded.input(name, t, _margin(t, block)) for name, t in zip("QKV", (q, k, v), strict=True)]
    returned = getattr(module, FORWARD)(*views, causal=causal)
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise shared.BadOutput(f"{FORWARD}() must return (o, lse), not {type(returned).__name__}")
    o = shared.returned_tensor(f"{FORWARD}() returned as o", returned[0], returned[0], tuple(q.shape))
    lse = shared.returned_tensor(f"{FORWARD}() returned as lse", returned[1], returned[1], tuple(q.shape[:-1]),
                                 torch.float32)
    return o, lse


def run_backward(
    module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    do: torch.Tensor, causal: bool, block_m: int, block_n: int, fills: dict[str, str] | None = None,
    record_visits: bool = True,
) -> tuple[dict[str, torch.Tensor], shared.Guarded, torch.Tensor, torch.Tensor]:
    """One backward launch, every tensor inside a guard band: the inputs between NaN
    margins (``fills`` maps a name of :data:`INPUT_BANDS` to another fill), dQ, dK, dV
    poisoned, the visit maps zeroed with sentinel margins (``record_visits=False``: the
    maps are not passed, ``dkdv_visits=None, dq_visits=None``, as a student's own call
    would; they stay zero)."""
    batch, heads, seq, _ = q.shape
    device = str(q.device)
    fills = fills or {}
    block = max(block_m, block_n)
    guarded = shared.Guarded()
    views = [guarded.input(name, t, _margin(t, block), fills.get(name, "nan"))
             for name, t in zip(INPUT_BANDS, (q, k, v, o, do, lse), strict=True)]
    outs = {g: guarded.output(GRAD_BANDS[g], tuple(q.shape), device, _margin(q, block)) for g in GRADS}
    n_m, n_n = launching.visit_grid(seq, block_m, block_n)
    maps = {}
    for name, shape in zip(MAP_BANDS, ((batch * heads, n_n, n_m), (batch * heads, n_m, n_n)), strict=True):
        maps[name] = guarded.visits(name, shape, device, guarding.margin_elements(shape, 2 * max(n_m, n_n)))
    qv, kv, vv, ov, dov, lsev = views
    returned = getattr(module, BACKWARD)(
        qv, kv, vv, ov, lsev, dov, causal=causal, dq=outs["dq"], dk=outs["dk"], dv=outs["dv"],
        dkdv_visits=maps["dK/dV visit map"] if record_visits else None,
        dq_visits=maps["dQ visit map"] if record_visits else None,
    )
    shared.synchronize(q)
    if returned is not None:
        if not isinstance(returned, (tuple, list)) or len(returned) != 3:
            raise shared.BadOutput(f"{BACKWARD}() must return (dq, dk, dv) or None, not {type(returned).__name__}")
        for name, value in zip(GRADS, returned, strict=True):
            outs[name] = shared.returned_tensor(f"{BACKWARD}() returned as {name}", value, outs[name], tuple(q.shape))
    return outs, guarded, maps["dK/dV visit map"], maps["dQ visit map"]


def launch_case(
    name: str, causal: bool, module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
    tolerance: float, block_m: int, block_n: int, relative: bool = False, recheck_plain: bool = False,
) -> BackwardLaunch:
    """One case: the student's forward, then their backward, checked.  ``relative``
    (the hostile case): each gradient element is held to its own allowance
    (:func:`allowances`) and its error is reported in the tolerance's units.
    ``recheck_plain`` (a compiled GPU run): where the backward with visit maps fails, the
    same inputs once more without them; where that launch is right, the case is judged
    by it (the kernel the student ships passes no maps; the two are two compilations),
    and ``with_maps_err`` keeps what the launch with maps measured."""
    o, lse = run_forward(module, q, k, v, causal)
    ref = reference(q, k, v, do, causal)
    allowed = allowances(ref, q, k, v, do, tolerance) if relative else None
    # O is checked; lse passes from the student's forward to their backward as it is (its
    # convention is theirs: a consistent log2 lse is right too)
    o_err = float((o.to(torch.float64) - ref.o).abs().nan_to_num(nan=float("inf")).max())
    forward_ok = o_err <= tolerance
    forward_detail = f" (O is off by up to {o_err:.3g})"
    grads, guarded, dkdv_visits, dq_visits = run_backward(module, q, k, v, o, lse, do, causal, block_m, block_n)
    judged = _judge(name, causal, q, grads, guarded, ref, allowed, tolerance, forward_ok)
    with_maps_err: dict[str, float | None] = {}
    if recheck_plain and forward_ok and not judged.case.passed:
        plain, plain_guarded, _, _ = run_backward(module, q, k, v, o, lse, do, causal, block_m, block_n,
                                                  record_visits=False)
        again = _judge(name, causal, q, plain, plain_guarded, ref, allowed, tolerance, forward_ok)
        if again.case.passed:
            # the maps shown are the first launch's: their bands (a store past a map's end means its
            # blocks are not counted) come from it, every other band from the launch that judges
            maps_bands = [b for b in guarded.bands if b.name in MAP_BANDS]
            plain_guarded.bands = [b for b in plain_guarded.bands if b.name not in MAP_BANDS] + maps_bands
            with_maps_err, judged, grads, guarded = judged.per_err, again, plain, plain_guarded
    rechecked = recheck_plain and forward_ok and not judged.case.passed  # and failed without maps too
    return BackwardLaunch(
        case=judged.case, q=q, k=k, v=v, do=do, o=o, lse=lse, grads=grads, ref=ref,
        forward_ok=forward_ok, forward_detail=forward_detail, per_grad_err=judged.per_err,
        unwritten=judged.unwritten, nonfinite=judged.nonfinite, out_of_bounds=judged.oob,
        dkdv_visits=dkdv_visits, dq_visits=dq_visits, guarded=guarded, with_maps_err=with_maps_err,
        failed_without_maps=rechecked,
    )


@dataclass
class _Judged:
    """One backward launch's gradients measured against the reference."""

    case: CaseResult
    per_err: dict[str, float | None]
    unwritten: dict[str, int]
    nonfinite: dict[str, int]
    oob: dict[str, bool]


def _judge(name: str, causal: bool, q: torch.Tensor, grads: dict[str, torch.Tensor], guarded: shared.Guarded,
           ref: Reference, allowed: dict[str, torch.Tensor] | None, tolerance: float, forward_ok: bool) -> _Judged:
    """dQ, dK and dV against the reference (within ``allowed`` where given), and their
    guard bands: the case's result is the worst of the three."""
    per_err, unwritten, nonfinite, oob = {}, {}, {}, {}
    worst_row, worst = None, -1.0
    measured: dict[str, shared.Measured] = {}
    for g in GRADS:
        out = grads[g]
        # with allowances, in the tolerance's units: <= tolerance iff within every allowance
        measured[g] = one = (shared.measure_output(out, ref.grads[g]) if allowed is None
                             else shared.measure_within(out, ref.grads[g], allowed[g], tolerance))
        unwritten[g], nonfinite[g], per_err[g] = one.unwritten, one.nonfinite, one.max_err
        oob[g] = bool(guarded.band(GRAD_BANDS[g]).changed())
        top = float(one.error.max())
        if top > worst:
            worst = top
            worst_row = (int(one.error.argmax()) // out.shape[-1]) % out.shape[-2]
    errors = list(per_err.values())
    # the case's error is the largest of the three gradients'
    together = shared.Measured(unwritten=sum(unwritten.values()), nonfinite=sum(nonfinite.values()),
                               error=measured["dq"].error,
                               max_err=None if None in errors else max(e for e in errors if e is not None))
    case = shared.case_result(name, causal, list(q.shape), together, tolerance, any(oob.values()), worst_row,
                              ok=forward_ok)
    return _Judged(case=case, per_err=per_err, unwritten=unwritten, nonfinite=nonfinite, oob=oob)


# ------------------------------------------------------------------------------------
# the hostile case: large scores (issue 21)
# ------------------------------------------------------------------------------------
HOSTILE_SHAPE = (1, 1, 128, 64)  # one head, a length that is a whole number of blocks of 16..128
LARGE_SHIFT = 120.0  # a "large" row's scores sit around +120: exp/exp2 of a raw score overflow fp32 (~88.7)
RAMP_SCORE = 150.0  # a "late"/"early" row's scores ramp 0..150 over the keys (maximum last / first)
STEP_KEYS = 4  # a "large" row scores ~0 on the first keys, ~LARGE_SHIFT on the rest
FP32_EXP_LIMIT = math.log(torch.finfo(torch.float32).max)  # 88.72: exp of more is inf in fp32
# u: fp16's unit roundoff.  A gradient's terms pass through at most four fp16 roundings the
# float64 reference does not make: P (or dS) rounded for its matmul, the fp16 O that D is
# summed from, the fp16 store of the gradient itself, and dP's fp16 operands; each moves a
# term by at most u relative (fp32 accumulation and the fp32 lse, ~1e-5 relative at
# scores of 150, are far below it).
FP16_U = shared.FP16_U
# non-finite gradients at ordinary scores are run again with q divided by each of these in
# turn (powers of 2: exact in fp16) until they are finite: a scale 8 or 64 times too large
# (sm_scale left out, or 1/sm_scale for sm_scale at head_dim 64) then scores like the
# ordinary case, P no longer overflows, and its slope is measurable (at 1/64 a P off by 8 is
# nearly uniform, below what the read-out measures)
SMALL_SCORES_DIVISORS = (8.0, 64.0)
ROUNDINGS = shared.ROUNDINGS


def hostile_case(device: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """fp16 q, k, v, dO of :data:`HOSTILE_SHAPE` whose rows, by r % 4, score: as usual
    (a control), all around +LARGE_SHIFT, a ramp rising to +RAMP_SCORE at the last key,
    the same ramp falling from the first key.  Dims 0 and 1 of q and k build them; q is
    scaled, never k, so every input stays finite in fp16.  Dim 2 takes LARGE_SHIFT off the
    large rows' scores of the first STEP_KEYS keys: causal row 1 sees only those, and the
    keys after it, which it may not see, score LARGE_SHIFT above its lse, so an exp taken
    on the pairs the mask removes overflows to inf there (inf times a 0 mask is NaN: blind
    round 11, w104)."""
    shape = HOSTILE_SHAPE
    seq, head_dim = shape[2], shape[3]
    q, k, v, do = (torch.randn(shape, generator=generator, dtype=torch.float32) for _ in range(4))
    root = head_dim**0.5
    rows = torch.arange(seq)
    q[..., :2] = 0.0
    k[..., 0] = torch.linspace(0.0, 8.0, seq)
    k[..., 1] = 8.0
    q[..., rows % 4 == 1, 1] = LARGE_SHIFT * root / 8.0
    q[..., rows % 4 == 2, 0] = RAMP_SCORE * root / 8.0
    q[..., rows % 4 == 3, 0] = -RAMP_SCORE * root / 8.0
    q[..., rows % 4 == 3, 1] = RAMP_SCORE * root / 8.0  # early rows: +150 at key 0, falling to 0
    q[..., 2] = 0.0
    k[..., 2] = 0.0
    k[..., :STEP_KEYS, 2] = -8.0
    q[..., rows % 4 == 1, 2] = LARGE_SHIFT * root / 8.0  # large rows: ~0 on keys 0..STEP_KEYS-1
    return tuple(t.to(device, torch.float16) for t in (q, k, v, do))


def allowances(ref: Reference, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
               tolerance: float) -> dict[str, torch.Tensor]:
    """Each gradient element's allowed error on the hostile case: the drill's absolute
    tolerance plus ROUNDINGS * u times the sum of the absolute values of the terms that
    make the element up (float64, on the tensors' device).

    Derivation: dV_j = sum_i P_ij dO_i, dQ_i = sum_j dS_ij K_j / sqrt(d), dK_j = sum_i
    dS_ij Q_i / sqrt(d) with dS = P * (dP - D).  A kernel's P_ij differs from the true one
    by at most ~u relative, and its dS_ij by at most u (|dP_ij| + sum|dO_i * O_i|) P_ij
    per rounding; so each sum's error is bounded by u times the same sum over |terms|,
    per rounding.  On standard-normal inputs that bound is below the tolerance; with
    scores of 120-150, |Q| reaches ~19 sqrt(d) in one dim and dK's terms grow with it,
    so an absolute tolerance would fail a correct kernel (or, loosened, pass a wrong
    one): here the allowance grows exactly with the terms' size and no more."""
    do64, q64, k64 = (t.to(torch.float64) for t in (do, q, k))
    scale = q.shape[-1] ** -0.5
    p = ref.p
    dp_abs = do64.abs() @ v.to(torch.float64).abs().transpose(-1, -2)
    d_abs = (do64.abs() * ref.o.abs()).sum(-1, keepdim=True)
    ds_abs = p * (dp_abs + d_abs)
    slack = ROUNDINGS * FP16_U
    return {
        "dv": tolerance + slack * (p.transpose(-1, -2) @ do64.abs()),
        "dq": tolerance + slack * (ds_abs @ k64.abs()) * scale,
        "dk": tolerance + slack * (ds_abs.transpose(-1, -2) @ q64.abs()) * scale,
    }


READ_AFTER = {name: f"A load of {name} for the last block has no mask (or one that lets rows past N_CTX through)"
                    ", or its offsets run past the tensor's end at this length (strides swapped, a wrong base)."
              for name in INPUT_BANDS}


def guard_report(module: ModuleType, launches: list[BackwardLaunch], block_m: int,
                 block_n: int) -> tuple[list[GuardFinding], dict[str, str]]:
    """What the guard bands saw (:func:`tutor.harness.guarded.guard_report`): every margin a
    backward's stores changed (dQ, dK and dV's are store-out-of-bounds), and for the first
    launch whose forward was right and whose gradients hold NaN, the input margins that NaN
    came from (re-run with finite margins, then NaN on one side of one input)."""
    banded = [shared.Banded.of(x.guarded.bands, x.case, _where(x.case)) for x in launches if x.guarded is not None]
    nan: shared.NanProbe | None = None
    first = next((x for x in launches if x.case.nonfinite and x.forward_ok), None)
    if first is not None:
        one = first

        def again(fills: dict[str, str]) -> torch.Tensor:
            grads = run_backward(module, one.q, one.k, one.v, one.o, one.lse, one.do, one.case.causal,
                                 block_m, block_n, fills)[0]
            return torch.cat([grads[g].flatten() for g in GRADS])

        mode = "causal" if one.case.causal else "full"
        nan = shared.NanProbe(one.case, again, f"seq = {one.case.shape[2]} (the {one.case.name} shape, {mode})",
                              INPUT_BANDS, READ_AFTER)
    return shared.guard_report(banded, nan, outputs=tuple(GRAD_BANDS.values()))


def _where(case: CaseResult) -> str:
    return f" (seen on the {case.name} shape, seq={case.shape[2]}, {'causal' if case.causal else 'full'})"


# ------------------------------------------------------------------------------------
# visit maps
# ------------------------------------------------------------------------------------
def needed(seq: int, block_m: int, block_n: int, i: int, j: int) -> bool:
    """Does query block i hold a row that may see a key of key block j (causal)?"""
    return ideal_visits(seq, block_m, block_n, True)[i][j]


def visit_maps(launch: BackwardLaunch, seq: int, block_m: int, block_n: int, causal: bool) -> list[VisitMap]:
    dq_ideal = ideal_visits(seq, block_m, block_n, causal)  # the forward's: query blocks x key blocks
    kv_ideal = [list(column) for column in zip(*dq_ideal, strict=True)]
    return [
        block_visit_map(launch.dq_visits, seq, block_m, block_n, dq_ideal,
                        "dQ loop: rows are query blocks, columns the key blocks each one visited"),
        block_visit_map(launch.dkdv_visits, seq, block_n, block_m, kv_ideal,
                        "dK/dV loop: rows are key blocks, columns the query blocks each one visited"),
    ]


# ------------------------------------------------------------------------------------
# diagnosis: what the gradients measurably are
# ------------------------------------------------------------------------------------
def _bh(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, *t.shape[-2:])


def _candidate_p(launch: BackwardLaunch, block_m: int, block_n: int) -> dict[str, torch.Tensor]:
    """P as a kernel computes it with each known mistake in its recomputation, keyed by code/variant."""
    ref = launch.ref
    s, allowed, lse = ref.s, ref.allowed, ref.lse
    seq = s.shape[-1]
    lse_ = lse[..., None]

    def keep(p: torch.Tensor, rule: torch.Tensor = allowed) -> torch.Tensor:
        return torch.where(rule, p, torch.zeros((), dtype=p.dtype, device=p.device))

    pad = -seq % block_n
    # the maximum of each (row, key tile): over the tile as loaded (padded keys score 0,
    # nothing masked yet), or over the pairs the row may see
    raw = torch.cat([s, s.new_zeros(*s.shape[:-1], pad)], dim=-1) if pad else s
    tiles = raw.shape[-1] // block_n
    tile_max_raw = torch.unflatten(raw, -1, (tiles, block_n)).amax(-1).repeat_interleave(block_n, -1)[..., :seq]
    masked = s.masked_fill(~allowed, float("-inf"))
    masked_pad = torch.cat([masked, masked.new_full((*s.shape[:-1], pad), float("-inf"))], -1) if pad else masked
    tile_max_ok = torch.unflatten(masked_pad, -1, (tiles, block_n)).amax(-1).repeat_interleave(block_n, -1)[..., :seq]
    tile_max_ok = torch.where(torch.isfinite(tile_max_ok), tile_max_ok, torch.zeros_like(tile_max_ok))
    row_max = masked.amax(-1, keepdim=True)
    found: dict[str, torch.Tensor] = {}
    for mask_name, rule in (("", allowed), ("/unmasked", torch.ones_like(allowed))):
        if mask_name and not bool((~allowed).any()):
            continue
        for variant, tmax in (("tile-max", tile_max_raw), ("tile-max-valid", tile_max_ok)):
            p = keep(torch.exp(s - tmax), rule)
            found[f"p-not-from-lse/{variant}{mask_name}"] = p
            tile_sum = torch.cat([p, p.new_zeros(*p.shape[:-1], pad)], -1) if pad else p
            tile_sum = torch.unflatten(tile_sum, -1, (tiles, block_n)).sum(-1).repeat_interleave(block_n, -1)[..., :seq]
            found[f"p-not-from-lse/{variant}-softmax{mask_name}"] = torch.where(tile_sum > 0, p / tile_sum, p)
        found[f"p-not-from-lse/row-max{mask_name}"] = keep(torch.exp(s - row_max), rule)
        found[f"p-wrong-scale/exp2{mask_name}"] = keep(torch.exp2(s - lse_), rule)
        found[f"p-wrong-scale/log2-units{mask_name}"] = keep(torch.exp(s - lse_ * LN2), rule)
        found[f"p-wrong-scale/lse-log2{mask_name}"] = keep(torch.exp(s - lse_ * LOG2E), rule)
        head_dim = launch.q.shape[-1]
        found[f"p-wrong-scale/scale-twice{mask_name}"] = keep(torch.exp(s * head_dim**-0.5 - lse_), rule)
        found[f"p-wrong-scale/unscaled{mask_name}"] = keep(torch.exp(s * head_dim**0.5 - lse_), rule)
        if block_m == block_n:  # lse[None, :] broadcasts only on a square tile
            found[f"dv-wrong/{_LSE_ALONG_KEYS}{mask_name}"] = keep(torch.exp(s - _lse_along_keys(lse, block_m)), rule)
    return found


_LSE_ALONG_KEYS = ("exp(s - lse) with lse broadcast along the keys: key c's column subtracts the lse of query row"
                   " start_m + (c - start_n), the row at the key's place in its block (lse[None, :] where lse[:, None]"
                   " belongs)")


def _lse_along_keys(lse: torch.Tensor, block: int) -> torch.Tensor:
    """(..., N, N): for row r and key c, the lse a square tile's ``lse[None, :]`` subtracts there, that of
    row (r // block) * block + c % block, or 0 past the last row (the masked load's other=0.0)."""
    rows = _misread_rows(lse.shape[-1], block, block, lse.device)[_BROADCAST_THE_OTHER_WAY]
    return _read_rows(lse, rows)


def _visited_pairs(visits: torch.Tensor, seq: int, row_block: int, col_block: int) -> torch.Tensor:
    """(bh, N, N) bool over (query row, key) from a visit record: was the pair's tile visited?
    ``visits`` is indexed [bh, query block, key block]."""
    rows = torch.arange(seq, device=visits.device) // row_block
    cols = torch.arange(seq, device=visits.device) // col_block
    return (visits != 0)[:, rows][:, :, cols]


def _fits(student: torch.Tensor, candidate: torch.Tensor, tolerance: float) -> bool:
    return matches(student.reshape(candidate.shape), candidate, tolerance)


FP16_HALF_ULP = 2.0**-11  # the most rounding to fp16 moves a number, relative to it


def _fits_product(student: torch.Tensor, a: torch.Tensor, b: torch.Tensor, tolerance: float) -> bool:
    """Does ``student`` equal ``a @ b`` (float64) with ``a`` rounded to fp16 on the way, as the drill's dots
    take their P or dS (p.to(do.dtype)): within :func:`_fits`'s slack plus the most that rounding can move
    each element, 2^-11 (|a| @ |b|).  A P far above 1 (another row's lse) makes that bound larger than the
    slack (the GPU's 2x8x1000x64: 1.3x; 1 seed in 10 at 1x2x200x64), where the model holds exactly."""
    fitted = a @ b
    return matches(student.reshape(fitted.shape), fitted, tolerance, slack=FP16_HALF_ULP * (a.abs() @ b.abs()))


def _scale_ratio(student: torch.Tensor, expected: torch.Tensor, tolerance: float) -> float | None:
    """c when ``student`` is c times ``expected`` (to within the tolerance), else None."""
    s, e = student.to(torch.float64).flatten(), expected.flatten()
    norm = float(e @ e)
    if norm == 0.0:
        return None
    c = float(s @ e) / norm
    return c if _fits(student, c * expected, tolerance) else None


def _one_block_share(contrib: torch.Tensor, student: torch.Tensor, visits: torch.Tensor, seq: int,
                     row_block: int, tolerance: float) -> str | None:
    """Is ``student`` (dK or dV by key block, dQ by query block: its rows in blocks of ``row_block``)
    the share of a single block of the loop to each of its row blocks: the first or the last one
    its loop visited?  ``contrib``: (loop blocks, bh, N, d); ``visits``: (bh, row blocks, loop blocks)."""
    visited = visits != 0  # (bh, row blocks, loop blocks)
    if not bool(visited.any()):
        return None
    n_i = visited.shape[-1]
    index = torch.arange(n_i, device=visited.device)
    last = torch.where(visited, index, torch.full_like(index, -1)).amax(-1).clamp(min=0)  # (bh, key blocks)
    first = torch.where(visited, index, torch.full_like(index, n_i)).amin(-1).clamp(max=n_i - 1)
    key_block = torch.arange(seq, device=visited.device) // row_block  # each row's block
    # only row blocks whose loop visited several blocks can tell one share from the sum
    several = (visited.sum(-1) >= 2)[:, key_block]  # (bh, N)
    if not bool(several.any()):
        return None
    summed = (contrib * visited.permute(2, 0, 1)[:, :, key_block, None]).sum(0)  # over the visited blocks
    mine = _bh(student).to(torch.float64)[several]
    for which, pick in (("last", last), ("first", first)):
        chosen = pick[:, key_block]  # (bh, N)
        gathered = contrib.gather(0, chosen[None, :, :, None].expand(1, -1, -1, contrib.shape[-1]))[0]
        if _fits(mine, gathered[several], tolerance) and not _fits(summed[several], gathered[several], tolerance):
            return which
    return None


def _contributions(a: torch.Tensor, x: torch.Tensor, block_m: int) -> torch.Tensor:
    """(query blocks, bh, N, d): each query block's share of aᵀ x (a: (bh, N_q, N_k), x: (bh, N_q, d))."""
    seq = a.shape[-2]
    parts = []
    for start in range(0, seq, block_m):
        parts.append(a[:, start : start + block_m].transpose(-1, -2) @ x[:, start : start + block_m])
    return torch.stack(parts)


D_CANDIDATES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "zero (missing)": lambda o, do: torch.zeros_like(o[..., 0]),
    "rowsum(dO * dO)": lambda o, do: (do * do).sum(-1),
    "rowsum(O * O)": lambda o, do: (o * o).sum(-1),
    "rowsum(dO)": lambda o, do: do.sum(-1),
    "rowsum(O)": lambda o, do: o.sum(-1),
}


def _fitted_d(launch: BackwardLaunch, tolerance: float) -> torch.Tensor | None:
    """The D_i the student's dQ implies, when its error is exactly what a wrong D does.

    dS = P ∘ (dP − D'), so dQ' − dQ = −(D' − D)_i · (P K)_i / √d row by row.  Fit
    δ_i per row by least squares; when the fit leaves nothing beyond the tolerance,
    the student's D is D + δ."""
    ref = launch.ref
    head_dim = launch.q.shape[-1]
    g = (ref.p @ launch.k.to(torch.float64)) * head_dim**-0.5  # what one unit of D moves dQ by
    err = launch.grads["dq"].to(torch.float64) - ref.grads["dq"]
    norm = (g * g).sum(-1)
    delta = -(err * g).sum(-1) / norm.clamp(min=1e-12)
    if not _fits(launch.grads["dq"], ref.grads["dq"] - delta[..., None] * g, tolerance):
        return None
    d_ref = (launch.do.to(torch.float64) * ref.o).sum(-1)
    d_student: torch.Tensor = d_ref + delta
    return d_student


Probe = Callable[["BackwardLaunch"], "readout.PReadout | None"]
# the dQ loop's dS read-out's words (:func:`readout.describe_ds`), measured once, lazily, on
# the smallest failing case short enough for one-hot K; "" where none is
DsWords = Callable[[], str]
NanWords = Callable[["BackwardLaunch"], str]  # a case's non-finite gradients read again at small scores


def lse_factors(head_dim: int) -> dict[str, float]:
    """The constants an lse is usually multiplied by on its way to the subtraction."""
    scale = head_dim**-0.5
    return {"sm_scale": scale, "1/sm_scale": 1 / scale, "log2(e)": LOG2E, "ln 2": LN2,
            "sm_scale·log2(e)": scale * LOG2E}


def p_readout_detail(launch: BackwardLaunch, probe: Probe, block_m: int, block_n: int) -> tuple[str, str] | None:
    """(code, detail) from the P the dK/dV loop uses, read out through dV (one probe
    launch, :mod:`backward_readout`); None when the read-out says nothing sure."""
    read = probe(launch)
    if read is None:
        return None
    ref = launch.ref
    shape = readout.describe(read, ref.s, ref.lse, ref.allowed, block_n, launch.lse)
    rows = f"rows {read.rows[0]}-{read.rows[-1]}"
    how = f" (read out through dV with one-hot dO on {rows}:"
    if shape.right:
        if len(read.rows) == launch.q.shape[-2]:
            return "dv-wrong", (f"{how} the P of the dK/dV loop is exp(s - lse) on every row, mask included:"
                                " P is right, so the dV accumulation (dv += P^T dO, its store) is what is wrong.)")
        return "dv-wrong", (f"{how} the P of the dK/dV loop is exp(s - lse) on those rows, mask included: the"
                            " dV error comes from the accumulation (dv += P^T dO, its store) or from P on the"
                            " earlier rows.)")
    if (shape.missing_pairs or shape.extra_pairs) and shape.rest_right:  # the mask, measured pair by pair
        parts: list[str] = []
        if shape.missing_pairs:
            kinds = ", ".join(f"{n} on {k}" for k, n in shape.missing_kinds.items())
            parts.append(f"is 0 on {shape.missing_pairs} (row, key) pairs the row must see and softmax weighs"
                         f" {10 * readout.MEASURABLE:g} or more ({kinds})")
        if shape.extra_pairs:
            kinds = ", ".join(f"{n} on {k}" for k, n in shape.extra_kinds.items())
            parts.append(f"gives weight over {readout.MEASURABLE:g} to {shape.extra_pairs} pairs the row may not"
                         f" see ({kinds})")
        skipped = (", which query blocks its loop visits (P is 0 on a block it skips) and the rows its Q and dO"
                   " loads take (a block loaded from another block's rows)") if shape.missing_pairs else ""
        unvisited = _missing_where_unvisited(launch, shape, read.rows, block_m, block_n)
        if unvisited:
            return "dv-wrong", (f"{how} the dK/dV loop's P {' and '.join(parts)}, and is right on every other pair."
                                f"{unvisited})")
        return "dv-wrong", (f"{how} the dK/dV loop's P {' and '.join(parts)}, and is right on every other pair:"
                            f" look at its mask{skipped}.)")
    if shape.slope is not None and abs(shape.slope - 1) > 0.05:
        return "dv-wrong", f"{how}{_slope_words(shape.slope, launch.q.shape[-1])}.)"
    wrong = readout_spans(shape.wrong_rows)
    if shape.per_row and shape.wrong_rows:
        lo, hi = shape.factors
        whole = round(lo)
        if whole >= 2 and abs(lo - whole) < 0.02 * whole and abs(hi - whole) < 0.02 * whole:
            said = (f"{how} on rows {wrong} the dK/dV loop's P has the right shape along each row but is"
                    f" {whole} times the true one on every one of them: a whole number, as when the loop adds"
                    f" those rows' share {whole} times (a step smaller than the rows it loads, or two loops"
                    f" over the same rows), or the lse it subtracts is off by exactly ln {whole}")
            return "p-rows-wrong", said + ".)"
        said = (f"{how} on rows {wrong} the dK/dV loop's P has the right shape along each row but is"
                f" {lo:.3g}-{hi:.3g} times the true one, one factor per row: the value it subtracts is not"
                " the row's lse")
        pairs = sorted(shape.lse_from.items())
        heads = sorted(shape.lse_head_from.items())
        scaled = shape.lse_scaled
        named = None if scaled is None else next(
            (name for name, value in lse_factors(launch.q.shape[-1]).items() if abs(scaled / value - 1) < 0.01), None)
        if scaled is not None:
            said += (f"; each of them subtracts its own lse times {scaled:.4g}"
                     + (f" ({named})" if named else "")
                     + ": the right row's lse, scaled on its way to the subtraction (it is in the scores'"
                     " natural-log units, s = q·k·sm_scale, as the forward stored it)")
        elif heads and len(heads) >= 9 * len(pairs):
            said += ("; each of them subtracts, of the same row, another (batch, head)'s lse (e.g. "
                     + ", ".join(f"head {h} row {r}: head {o}'s" for (h, r), o in heads[:3])
                     + "): the lse pointer misses its (batch, head) offset")
        elif pairs and len(pairs) >= len(shape.wrong_rows) // 2:
            shifts = {r - m for r, m in pairs}
            if len(shifts) == 1:
                said += f"; each of them subtracts the lse of the row {shifts.pop()} rows before it"
            elif sum(m == r % block_m for r, m in pairs) >= 0.9 * len(shape.wrong_rows):
                hits = sum(m == r % block_m for r, m in pairs)
                said += (f"; {hits} of the {len(shape.wrong_rows)} subtract the lse of row (their row mod {block_m}):"
                         " the first query block's row at the same position, as if lse were loaded at offsets"
                         " within the block")
            else:
                said += "; e.g. " + ", ".join(f"row {r} subtracts row {m}'s" for r, m in pairs[:3])
        return "p-rows-wrong", said + ".)"
    if shape.per_block:
        return "p-rows-wrong", (f"{how} on rows {wrong} the dK/dV loop's P is off by a factor that is constant"
                                " within each key block but changes from one key block to the next: what it"
                                " divides by depends on the key block, not on the row alone - an lse loaded"
                                " by key, or each tile's P normalised on its own (a maximum or sum over the"
                                " tile) where the row's lse belongs.)")
    return None


def readout_spans(rows: list[int]) -> str:
    return spans(rows)


def explain(launch: BackwardLaunch, tolerance: float, block_m: int, block_n: int,
            probe: Probe | None = None, d_probe: DProbe | None = None,
            ds_words: DsWords | None = None) -> tuple[str, str] | None:
    """(code, detail) for a launch whose gradients are finite and written but wrong;
    None when nothing specific is measured."""
    ref, seq = launch.ref, launch.q.shape[-2]
    bad = {g: (launch.per_grad_err[g] or 0.0) > tolerance for g in GRADS}
    errs = "; ".join(f"{g[0]}{g[1].upper()} off by up to {launch.per_grad_err[g]:.3g}" for g in GRADS if bad[g])
    do64 = _bh(launch.do.to(torch.float64))
    q64 = _bh(launch.q.to(torch.float64))
    head_dim = launch.q.shape[-1]

    # dK and dV each hold the other's right values: the two results are swapped
    if bad["dk"] and bad["dv"] and _fits(launch.grads["dk"], ref.grads["dv"], tolerance) and _fits(
            launch.grads["dv"], ref.grads["dk"], tolerance):
        return "dv-wrong", (f" ({errs}. dK holds exactly what dV should and dV what dK should: the two results are"
                            " swapped, in the stores or in the tensors they are stored into.)")

    # dK/dV summed over the wrong loop: each key block holds a single query block's share
    for g, a, x, scale in (("dv", ref.p, do64, 1.0), ("dk", ref.ds, q64, head_dim**-0.5)):
        if bad[g]:
            contrib = _contributions(_bh(a), x, block_m) * scale
            which = _one_block_share(contrib, launch.grads[g], launch.dkdv_visits, seq, block_n, tolerance)
            if which is not None:
                return "dkdv-not-summed", (f" ({g[0]}{g[1].upper()} of each key block is the share of the {which}"
                                           " query block its loop visited.)")
    # dQ summed over the wrong loop: each query block holds a single key block's share (dq = ..., not +=)
    if bad["dq"]:
        k64 = _bh(launch.k.to(torch.float64))
        contrib = _contributions(_bh(ref.ds).transpose(-1, -2), k64, block_n) * head_dim**-0.5  # by key block
        which = _one_block_share(contrib, launch.grads["dq"], launch.dq_visits, seq, block_m, tolerance)
        if which is not None:
            return "dq-not-summed", f" (dQ of each query block is the share of the {which} key block its loop visited.)"

    if bad["dv"]:
        # dQ and dK right: the P of both loops is right (dK's dS is built from it), so only the dV
        # accumulation is left; said before any P candidate, which a dV scaled by a constant can
        # match by chance where every row's lse is nearly the same (a long non-causal row: run 21)
        c = None if bad["dq"] or bad["dk"] else _scale_ratio(launch.grads["dv"], ref.grads["dv"], tolerance)
        if c is not None:
            times = f" dV is {c:.3g} times the right one"
            times += f" (sm_scale = 1/sqrt({head_dim}): dV takes no scale)." if abs(
                c - head_dim**-0.5) < 0.02 * head_dim**-0.5 else "."
            return "dv-wrong", f" ({errs}; dQ and dK are right, so P is: look at the dV accumulation.{times})"
        operand = _dv_operand(launch, tolerance, bad["dk"])
        if operand:
            return "dv-wrong", f" ({errs}.{operand})"
        # dV = Pᵀ dO: only a different P explains it
        do64 = launch.do.to(torch.float64)
        for name, p in _candidate_p(launch, block_m, block_n).items():
            if _fits_product(launch.grads["dv"], p.transpose(-1, -2), do64, tolerance):
                variant = name.split("/", 1)[1]
                return name.split("/")[0], f" (dV matches P computed as {variant}.)"
        if launch.case.causal and bool(launch.dkdv_visits.any()):
            # the causal mask missing: P = exp(s - lse) on every pair the dK/dV loop visited
            visited = _visited_pairs(launch.dkdv_visits.transpose(-1, -2), seq, block_m, block_n)
            visited = visited.reshape(*ref.s.shape[:-2], seq, seq)
            missed = int((~visited & ref.allowed).sum())
            if missed:
                # the loop skipped pairs a row must see: a bound that cuts too early
                return "dv-wrong", (f" (the dK/dV loop skipped {missed} (row, key) pairs that a causal row must see:"
                                    " its bound cuts into the blocks it needs, or it steps past some.)")
            if bool((visited & ~ref.allowed).any()):
                p = torch.where(visited, torch.exp(ref.s - ref.lse[..., None]), torch.zeros((), dtype=torch.float64))
                if _fits(launch.grads["dv"], p.transpose(-1, -2) @ launch.do.to(torch.float64), tolerance):
                    if not bad["dq"] and not bad["dk"]:  # dS's P is masked: only dV's is not
                        return "causal-mask-missing", (" (dV includes the keys after each row in the blocks the"
                                                       " loop visited; dQ and dK are right, so only the P that"
                                                       " dV accumulates is unmasked.)")
                    where = ("; dQ is right, so the dQ loop's P is masked: the dK/dV loop's is not" if not bad["dq"]
                             else "")
                    return "causal-mask-missing", (" (dV includes the keys after each row in the blocks the dK/dV"
                                                   f" loop visited{where}.)")
        if not bad["dq"] and not bad["dk"]:
            return "dv-wrong", f" ({errs}; dQ and dK are right, so P is: look at the dV accumulation.)"
        if probe is not None:
            found = p_readout_detail(launch, probe, block_m, block_n)
            if found is not None:
                return found[0], f" ({errs}){found[1]}"
        return "dv-wrong", f" ({errs}.)"

    # dV is right, so P is: what remains is dS, D and the scales
    for g, code in (("dq", "dq-scale-missing"), ("dk", "dk-scale-missing")):
        other = "dk" if g == "dq" else "dq"
        if bad[g] and not bad[other]:
            c = _scale_ratio(launch.grads[g], ref.grads[g], tolerance)
            if c is not None:
                if abs(c * head_dim**-0.5 - 1) < 0.02:
                    return code, (f" ({g[0]}{g[1].upper()} is {c:.3g} times the right one:"
                                  f" sqrt(head_dim) = {head_dim**0.5:.3g}.)")
                if abs(c - head_dim**-0.5) < 0.02 * head_dim**-0.5:
                    return f"{g}-wrong", (f" ({g[0]}{g[1].upper()} is {c:.3g} times the right one:"
                                          f" sm_scale = 1/sqrt({head_dim}), so the scale is applied twice in"
                                          f" {'the dQ loop' if g == 'dq' else 'the dK/dV loop'}.)")
                return f"{g}-wrong", f" ({g[0]}{g[1].upper()} is {c:.3g} times the right one.)"
    if bad["dq"] and bad["dk"]:
        d_student = _fitted_d(launch, tolerance)
        if d_student is not None:
            o64, dof = launch.o.to(torch.float64), launch.do.to(torch.float64)
            d_ref = (dof * launch.ref.o).sum(-1)
            for name, make in D_CANDIDATES.items():
                cand = make(o64, dof)
                if name.startswith("zero") and float(d_student.abs().max()) > 0.005 * float(d_ref.abs().max()):
                    continue  # a D of a few % of the true one is within the slack of 0 on small rows, not missing
                if bool(((d_student - cand).abs() <= 0.05 + 0.02 * cand.abs()).all()):
                    code = "d-missing" if name.startswith("zero") else "d-wrong-tensors"
                    return code, f" (measured from dQ: your D is {name}, not rowsum(dO * O).)"
            return "d-wrong", _d_form(launch, d_student, block_m, tolerance)
        # the D-term probe names a D term; where it says nothing, the dQ loop's whole dS read out
        # (one-hot K: a dS without its factor P, blind round 11, w04)
        both = _d_term_detail(launch, d_probe, ("dq", "dk"), block_m, block_n) or (ds_words() if ds_words else "")
        return "ds-wrong", f" ({errs}; dV is right.{both})"
    if bad["dq"] != bad["dk"]:  # one loop wrong: does its own dS leave out D?
        g = "dq" if bad["dq"] else "dk"
        other = "dK" if g == "dq" else "dQ"
        # the D-term probe measures the loop's D term directly; where it says nothing, the dQ
        # loop's whole dS read out (one-hot K, on a failing short case: a model of it that
        # reproduces every pair); then the closed-form fits
        # exact closed forms first
        own = _dk_operand(launch, tolerance, block_n) if g == "dk" else _dq_operand(launch, tolerance)
        own = own or _key_indexed(launch, g, tolerance, block_m, block_n)
        own = own or _d_term_detail(launch, d_probe, (g,), block_m, block_n)
        if not own and g == "dq" and ds_words is not None:
            own = ds_words()
        own = own or _own_ds(launch, g, tolerance) or (_dk_loop_d(launch, tolerance, block_m) if g == "dk" else "")
        return f"{g}-wrong", f" ({errs}; {other} and dV are right.{own})"
    return None


DProbe = Callable[["BackwardLaunch", bool], "dterm.DTermRead | None"]  # (launch, per_head)


def _d_term_detail(launch: BackwardLaunch, d_probe: DProbe | None, loops: tuple[str, ...], block_m: int,
                   block_n: int) -> str:
    """" <measured>": what the D-term probe (:mod:`backward_ds_readout`, one launch with
    dP = 0) says of each loop in ``loops`` ("dq", "dk"); "" where it says nothing sure."""
    if d_probe is None:
        return ""
    read = d_probe(launch, False)
    if read is None:
        return ""
    ref, head_dim = launch.ref, launch.q.shape[-1]
    shapes: dict[str, dterm.LoopShape] = {}
    if "dq" in loops:
        seq = launch.q.shape[-2]
        visited = _visited_pairs(launch.dq_visits, seq, block_m, block_n) if bool(launch.dq_visits.any()) else None
        shapes["dq"] = dterm.describe_dq(read, ref.s, ref.lse, ref.allowed, launch.k, visited)
    if "dk" in loops:
        shapes["dk"] = dterm.describe_dk(read, ref.p, launch.q)
    # "right" with one D for every program: is each program's D its own?  A second launch
    # with D made different per program (no D read from another head can hide there)
    per_head = None
    if any(s.right for s in shapes.values()) and launch.q.shape[0] * launch.q.shape[1] > 1:
        per_head = d_probe(launch, True)
    said = []
    for g, shape in shapes.items():
        if shape.right and per_head is not None:
            words = dterm.per_program_words(per_head, g, ref.s, ref.lse, ref.allowed, ref.p, launch.q, launch.k,
                                            launch.do)
            if words is not None:  # not each program's own, or no one factor per program: not "right"
                said.append(words)
                continue
        said.append(dterm.dq_words(shape, head_dim) if g == "dq" else dterm.dk_words(shape, head_dim))
    said = [s for s in said if s]
    if not said:
        return ""
    rows = f"{read.rows[0]}-{read.rows[-1]}"
    return " Measured " + dterm.PROBE.format(rows=rows) + ": " + "; ".join(said) + "."


def _d_form(launch: BackwardLaunch, d_student: torch.Tensor, block_m: int, tolerance: float) -> str:
    """What the D the dQ loop measurably uses is (fitted from dQ, :func:`_fitted_d`), and
    whether the dK/dV loop's dK agrees with the same D."""
    ref = launch.ref
    o64, do64 = launch.o.to(torch.float64), launch.do.to(torch.float64)
    d_ref = (do64 * ref.o).sum(-1)
    said = "dQ's error is, row by row, exactly what a wrong D_i gives"

    def close(a: torch.Tensor, b: torch.Tensor) -> bool:
        return bool(((a - b).abs() <= 0.05 + 0.02 * b.abs()).all())

    norm = float((d_ref * d_ref).sum())
    c = float((d_student * d_ref).sum()) / norm if norm > 0 else 0.0
    seq, head_dim = launch.q.shape[-2], launch.q.shape[-1]
    lse = launch.lse.to(torch.float64).reshape(d_student.shape)
    if close(d_student, lse):
        said += ": the D_i it subtracts is the row's lse (the lse tensor where delta belongs)"
    elif close(d_student, c * d_ref) and abs(c - 1) > 0.02:
        said += f": your D is {c:.3g} x rowsum(dO * O)"
        if abs(c - head_dim**-0.5) < 0.02 * head_dim**-0.5:
            said += " (sm_scale = 1/sqrt(head_dim): D is scaled, and it takes no scale)"
    elif block_m == head_dim:
        # summed over the block's rows (axis 0) instead of head_dim: row i at position p of its
        # query block gets the column sum of dO * O over that block at column p
        prod = do64 * o64
        pad = -seq % block_m
        padded = torch.cat([prod, prod.new_zeros(*prod.shape[:-2], pad, head_dim)], -2) if pad else prod
        cols = torch.unflatten(padded, -2, (padded.shape[-2] // block_m, block_m)).sum(-2)  # (..., blocks, d)
        axis0 = cols.flatten(-2)[..., :seq]  # block b's column p at row b * block_m + p
        if close(d_student, axis0):
            said += (": your D_i is the sum of dO * O down the query block's rows (axis 0) at column"
                     " (i mod BLOCK_M), not along head_dim (axis 1)")
    # the dK/dV loop: the same D?
    dp = do64 @ launch.v.to(torch.float64).transpose(-1, -2)
    dk = (ref.p * (dp - d_student[..., None])).transpose(-1, -2) @ launch.q.to(torch.float64) * head_dim**-0.5
    if _fits(launch.grads["dk"], dk, tolerance):
        said += ("; dK is exactly what the same D gives in the dK/dV loop: both loops use it (the preprocess's"
                 " output, or the same slip in both loops)")
    return f" ({said}.)"


def _misread_rows(seq: int, block_m: int, block_n: int, device: torch.device) -> dict[str, torch.Tensor]:
    """(N, N) long: for each (query row i, key j), the row whose D or lse a loop uses where it
    loads that row vector wrongly: at the key's index j; with the key block's offsets (row i of a
    query block takes key block start + i mod BLOCK_M: loaded at the key offsets, broadcast over
    the rows); or at the right rows broadcast the other way (key j of a block takes query block
    start + j mod BLOCK_N).  Rows at or past ``seq`` read 0 (a masked load's other)."""
    i = torch.arange(seq, device=device)[:, None].expand(seq, seq)
    j = torch.arange(seq, device=device)[None, :].expand(seq, seq)
    return {"at each key's index j": j,
            "at the key block's offsets (row i reads key block start + i mod BLOCK_M)":
                (j // block_n) * block_n + i % block_m,
            _BROADCAST_THE_OTHER_WAY: (i // block_m) * block_m + j % block_n}


_BROADCAST_THE_OTHER_WAY = "broadcast along the wrong axis (key j reads query block start + j mod BLOCK_N)"


def _read_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``values`` (..., N) read at ``rows`` (N, N) (:func:`_misread_rows`); a row at or past N reads 0,
    as a masked load's other=0.0 gives."""
    seq = values.shape[-1]
    padded = torch.cat([values, torch.zeros_like(values[..., :1])], dim=-1)
    return padded[..., rows.clamp(max=seq)]


def _key_indexed(launch: BackwardLaunch, grad: str, tolerance: float, block_m: int, block_n: int) -> str:
    """" <measured>" where the one wrong gradient (``grad``, "dq" or "dk") is exactly what its loop
    gives with D, or (the dQ loop) lse, read for another row than the query row's own, as
    :func:`_misread_rows` lists them (blind round 18, 04/w37: D loaded with the key offsets;
    w11: lse broadcast along the keys); "" otherwise."""
    ref = launch.ref
    seq = launch.q.shape[-2]
    q64, k64, v64, do64 = (t.to(torch.float64) for t in (launch.q, launch.k, launch.v, launch.do))
    scale = launch.q.shape[-1] ** -0.5
    d_rows = (do64 * ref.o).sum(-1)
    dp = do64 @ v64.transpose(-1, -2)
    masked = ref.s.masked_fill(~ref.allowed, float("-inf"))

    loop = "`_bwd_dkdv`" if grad == "dk" else "`_bwd_dq`"
    for how, rows in _misread_rows(seq, block_m, block_n, q64.device).items():
        candidates = {"D": ref.p * (dp - _read_rows(d_rows, rows))}
        if grad == "dq":  # the dK/dV loop's P is dV's too: with dV right, only the dQ loop's lse can be off
            candidates["lse"] = torch.exp(masked - _read_rows(ref.lse, rows)) * (dp - d_rows[..., :, None])
        for what, ds in candidates.items():
            if not bool(torch.isfinite(ds).all()):
                continue
            if _fits_product(launch.grads[grad], ds.transpose(-1, -2) if grad == "dk" else ds,
                             (q64 if grad == "dk" else k64) * scale, tolerance):
                return (f" {GRAD_BANDS[grad]} is exactly what {loop} gives with {what} read {how}, not at the"
                        f" query row i: look at the load of {what} in that loop, its offsets and how it is"
                        f" broadcast against the (query, key) tile.")
    return ""


def _dk_loop_d(launch: BackwardLaunch, tolerance: float, block_m: int) -> str:
    """" <measured>" when dK is exactly what the dK/dV loop gives with some other D'_i
    (dQ and dV right): dK' - dK = -sum_i P_ij (D'_i - D_i) Q_i / sqrt(d) is linear in
    delta = D' - D, fitted per head by least squares (the normal equations, N x N: (P Pᵀ) ∘
    (Q Qᵀ) / d); said when the fit leaves nothing beyond the tolerance."""
    ref = launch.ref
    head_dim = launch.q.shape[-1]
    p = _bh(ref.p)
    q64 = _bh(launch.q.to(torch.float64))
    err = _bh(launch.grads["dk"].to(torch.float64)) - _bh(ref.grads["dk"])
    gram = (p @ p.transpose(-1, -2)) * (q64 @ q64.transpose(-1, -2)) / head_dim
    rhs = -((p * (q64 @ err.transpose(-1, -2))).sum(-1)) * head_dim**-0.5
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    delta = torch.linalg.solve(gram + 1e-9 * eye, rhs[..., None])[..., 0]  # (bh, N)
    fitted = _bh(ref.grads["dk"]) - (p * delta[..., None]).transpose(-1, -2) @ q64 * head_dim**-0.5
    if not _fits(launch.grads["dk"], fitted, tolerance):
        return ""
    d_ref = _bh((launch.do.to(torch.float64) * ref.o).sum(-1)[..., None])[..., 0]
    used = d_ref + delta
    off = (delta.abs() > 0.02 + 0.02 * d_ref.abs()).any(0)  # rows whose D is not theirs
    if not bool(off.any()):
        return ""
    rows = off.nonzero().flatten().tolist()
    said = (f" dK is exactly what `_bwd_dkdv` gives with another D on rows {spans(rows)}"
            " (dS = P * (dP - D) there): its D term is wrong")
    # whose D: the first query block's row at the same position, for every wrong row of every head?
    index = torch.tensor(rows, device=used.device)
    theirs = d_ref[:, index % block_m]
    if bool(((used[:, index] - theirs).abs() <= 0.02 + 0.02 * theirs.abs()).all()):
        said += (f"; row r uses row (r mod {block_m})'s D: the first query block's row at the same position,"
                 " as if D were loaded at offsets within the block")
    return said + "."


def _own_ds(launch: BackwardLaunch, grad: str, tolerance: float) -> str:
    """" <measured>" when ``grad`` (dq or dk) is exactly what its loop gives with dS = P * dP
    (no D), the other loop's dS being right; else ""."""
    ref = launch.ref
    v64, do64 = launch.v.to(torch.float64), launch.do.to(torch.float64)
    ds_without_d = ref.p * (do64 @ v64.transpose(-1, -2))
    scale = launch.q.shape[-1] ** -0.5
    if grad == "dq":
        candidate = ds_without_d @ launch.k.to(torch.float64) * scale
    else:
        candidate = ds_without_d.transpose(-1, -2) @ launch.q.to(torch.float64) * scale
    if not _fits(launch.grads[grad], candidate, tolerance):
        return ""
    loop = "`_bwd_dq`" if grad == "dq" else "`_bwd_dkdv`"
    return f" {grad[0]}{grad[1].upper()} is exactly what {loop} gives with dS = P * dP: its dS leaves out D."


def _dq_operand(launch: BackwardLaunch, tolerance: float) -> str:
    """" <measured>" when dQ (dK and dV right) is exactly sm_scale · dS X with another input X in
    K's place (blind round 22, 04/m13: dS V); else ""."""
    ds = launch.ref.ds * launch.q.shape[-1] ** -0.5
    for name, x in (("V", launch.v), ("Q", launch.q), ("dO", launch.do)):
        if _fits(launch.grads["dq"], ds @ x.to(torch.float64), tolerance):
            return f" dQ is exactly sm_scale · dS {name}: the dQ loop's product takes {name} where K belongs."
    return ""


def _dk_operand(launch: BackwardLaunch, tolerance: float, block_n: int) -> str:
    """" <measured>" when dK (dV and dQ right) is exactly sm_scale · dSᵀ X with another input X
    in Q's place, or the right dK with each key block's (BLOCK_N, head_dim) tile transposed
    (Qᵀ dS taken for dSᵀ Q: a product that only compiles where BLOCK_N equals head_dim); else ""."""
    ref, head_dim = launch.ref, launch.q.shape[-1]
    ds_t = ref.ds.transpose(-1, -2) * head_dim**-0.5
    for name, x in (("dO", launch.do), ("K", launch.k), ("V", launch.v)):
        if _fits(launch.grads["dk"], ds_t @ x.to(torch.float64), tolerance):
            return f" dK is exactly sm_scale · dSᵀ {name}: the dK/dV loop's product takes {name} where Q belongs."
    seq = launch.k.shape[-2]
    whole = (seq // block_n) * block_n
    if block_n == head_dim and whole:
        right = ref.grads["dk"][..., :whole, :]
        tiles = right.reshape(*right.shape[:-2], whole // block_n, block_n, head_dim).transpose(-1, -2)
        mine = launch.grads["dk"].to(torch.float64)[..., :whole, :]
        if _fits(mine, tiles.reshape(right.shape), tolerance):
            return (f" Each whole key block's dK tile is the right one transposed (its key rows and head_dim columns"
                    f" exchanged, blocks of {block_n} keys): the product is taken as Qᵀ dS, a (head_dim, BLOCK_N)"
                    " tile, where dSᵀ Q, a (BLOCK_N, head_dim) one, belongs - it compiles only because BLOCK_N"
                    f" equals head_dim ({head_dim}) here.")
    return ""


def _dv_operand(launch: BackwardLaunch, tolerance: float, dk_bad: bool) -> str:
    """" <measured>" when dV is exactly Pᵀ X with the right P and another operand X in dO's
    place: another input (blind round 20, 04/w39: dO loaded from Q's pointer), or dO with its
    rows read one late or one early (04/w46); and whether a wrong dK is exactly what the same
    loop's dP = X Vᵀ gives; else ""."""
    ref = launch.ref
    do64 = launch.do.to(torch.float64)
    operands = {f"Pᵀ {name}: the dK/dV loop's dV product takes {name} where dO belongs": x.to(torch.float64)
                for name, x in (("Q", launch.q), ("K", launch.k), ("V", launch.v))}
    for shift, when in ((1, "late (row i reads dO of row i + 1)"), (-1, "early (row i reads dO of row i - 1)")):
        operands[f"Pᵀ dO with dO's rows read one row {when}: the rows of the dK/dV loop's dO load are off by"
                 " one"] = value_rows.shifted(do64, -shift, dim=-2)
    for what, x in operands.items():
        if not _fits(launch.grads["dv"], ref.p.transpose(-1, -2) @ x, tolerance):
            continue
        said = f" dV is exactly {what}."
        if dk_bad:
            # dK of that loop's dS = P (X Vᵀ - D), D the preprocess's rowsum(dO * O)
            ds = ref.p * (x @ launch.v.to(torch.float64).transpose(-1, -2) - (do64 * ref.o).sum(-1)[..., None])
            dk = ds.transpose(-1, -2) @ launch.q.to(torch.float64) * launch.q.shape[-1] ** -0.5
            said += (" dK is exactly what the same loop's dP = X Vᵀ gives with that operand."
                     if _fits(launch.grads["dk"], dk, tolerance) else " dK is wrong too.")
        return said
    return ""


GENERIC = {"dv-wrong", "dq-wrong", "dk-wrong", "ds-wrong"}


def spans(indices: list[int]) -> str:
    """"0-63, 65, 70-71": sorted indices as runs."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    words = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    return ", ".join(words[:6]) + (f" and {len(words) - 6} more runs" if len(words) > 6 else "")


UNSTEADY = " Run again on the same inputs, the NaN/Inf does not come back in the same places"


def _unsteady_nan_words(launch: BackwardLaunch, again: dict[str, torch.Tensor]) -> str:
    """``again``: the case's gradients from its own inputs run once more.  Where its NaN/Inf
    does not come back in the same elements, that in words (no function of the inputs: memory
    read before anything wrote it, or a race; blind round 13, 04 w40: dQ accumulated with
    atomic_add into a torch.empty buffer the launcher never zeroed); "" where it does."""
    names = [name for name in launch.grads if name in again]
    if all(torch.equal(torch.isfinite(again[n].float()).cpu(), torch.isfinite(launch.grads[n].float()).cpu())
           for n in names):
        return ""
    counts = ", ".join(f"{n} {int((~torch.isfinite(launch.grads[n].float())).sum())} then"
                       f" {int((~torch.isfinite(again[n].float())).sum())}" for n in names)
    return (f"{UNSTEADY} (non-finite elements: {counts}), so it is no function of the inputs alone. It"
            " comes from memory read before anything wrote it (a buffer the launcher allocates with"
            " torch.empty and accumulates into, say) or from an order of operations that changes between"
            " runs (a race).")


def _slope_words(slope: float, head_dim: int) -> str:
    """A P read out through dV that grows as exp(slope * s), in words; where the scale that slope
    implies is 1/sqrt(k) for a head_dim k other than this case's, that too (blind round 22, 04/m44:
    sm_scale = 0.125 written as a number)."""
    said = (f" the dK/dV loop's P grows as exp({slope:.3g} s) in the scores s, where exp(s - lse) grows as exp(s):"
            f" its scale or base is off by that factor")
    used = slope * head_dim**-0.5
    fixed = next((k for k in (16, 32, 64, 128, 256) if k != head_dim and abs(used - k**-0.5) <= 0.01 * k**-0.5), None)
    if fixed is not None:
        said += (f" (the scale it applies is {slope:.3g} / sqrt({head_dim}) = {used:.4g} = 1/sqrt({fixed}): a scale"
                 f" fixed for head_dim {fixed}, where this case's is {head_dim}; sm_scale must follow head_dim)")
    return said


def _missing_where_unvisited(launch: BackwardLaunch, shape: readout.PShape, rows: list[int], block_m: int,
                             block_n: int) -> str:
    """Words where the pairs the read-out P misses are exactly, on the rows read, the pairs a row
    must see in the tiles the dK/dV loop's visit map records as never visited, with the query
    blocks each key block's loop visits and, where they are evenly spaced more than one apart,
    the step (blind round 22, 04/m21: a loop over 32-row query blocks stepping BLOCK_N = 64); ""
    otherwise."""
    seq = launch.q.shape[-2]
    visited = _dkdv_visited_pairs(launch, seq, (block_m, block_n))
    if visited is None or shape.missing_at is None:
        return ""
    index = torch.tensor(rows, device=visited.device)
    ok = launch.ref.allowed[index]
    missing = shape.missing_at.any(0).to(visited.device)
    skipped = ok & ~visited[index]
    # the read-out calls a pair missing only where the true P is large enough to tell: so are these
    told = (launch.ref.p.reshape(-1, seq, seq)[:, index] > 10 * readout.MEASURABLE).any(0).to(visited.device)
    if not bool(missing.any()) or bool((missing & ~skipped).any()) or bool((skipped & told & ~missing).any()):
        return ""
    tiles = (launch.dkdv_visits.reshape(-1, *launch.dkdv_visits.shape[-2:]) > 0).any(0).cpu()  # (key b, query b)
    seen = tiles[0].nonzero().flatten().tolist()
    gaps = {b - a for a, b in zip(seen, seen[1:], strict=False)}
    gap = next(iter(gaps)) if len(gaps) == 1 else 1
    nth = {2: "second", 3: "third", 4: "fourth"}.get(gap, f"{gap}th")
    step = (f" - every {nth} query block: the loop steps {gap} query blocks ({gap * block_m} rows, BLOCK_M ="
            f" {block_m}) at a time") if gap > 1 else ""
    return (f" P is 0 exactly on the pairs, of those rows, in the (query block, key block) tiles the loop's visit"
            f" map records as never visited: for key block 0 it visits query blocks {', '.join(map(str, seen))} of"
            f" {tiles.shape[1]}{step}. Look at the loop's range and step over the query blocks.")


def _dkdv_visited_pairs(launch: BackwardLaunch, seq: int, blocks: tuple[int, int]) -> torch.Tensor | None:
    """(N, N) bool: the (row, key) pairs inside a (query block, key block) tile that the
    dK/dV loop's visit map records for any head; None where the map is not that grid."""
    block_m, block_n = blocks
    # on the reference's device: the pairs are compared with its scores and the gradients' NaN (on a
    # GPU, a map moved to the CPU stopped the diagnosis: H200 run 25)
    device = launch.ref.s.device
    visits = launch.dkdv_visits.reshape(-1, *launch.dkdv_visits.shape[-2:]).to(device)
    if tuple(visits.shape[-2:]) != (-(-seq // block_n), -(-seq // block_m)):
        return None
    tiles = (visits > 0).any(0)  # (key blocks, query blocks)
    idx = torch.arange(seq, device=device)
    return tiles[idx[None, :] // block_n, idx[:, None] // block_m]


def _bad_positions(t: torch.Tensor) -> torch.Tensor:
    """(N,) bool: sequence positions where any head's row of ``t`` is NaN/Inf."""
    return (~torch.isfinite(t.to(torch.float64))).reshape(-1, *t.shape[-2:]).any(-1).any(0)


def nonfinite_detail(launch: BackwardLaunch, blocks: tuple[int, int] | None = None) -> str:
    """Where the NaN/Inf of a launch's gradients are, measured: which gradients, which
    query rows (dQ) and keys (dK, dV), so which loop; and, when it holds exactly, that
    the rows holding them are the rows whose largest score passes exp's fp32 range, or
    (``blocks``: BLOCK_M, BLOCK_N, to read the dK/dV loop's visit map) that the keys holding
    them are the keys of the tiles it visited where a pair the mask removes scores past it."""
    seq = launch.q.shape[-2]
    bad = {g: _bad_positions(launch.grads[g]) for g in GRADS}
    parts = []
    for g in GRADS:
        if bool(bad[g].any()):
            what = "query rows" if g == "dq" else "keys"
            rows = bad[g].nonzero().flatten().tolist()
            parts.append(f"{g[0]}{g[1].upper()}: {launch.nonfinite[g]} elements, {what} {spans(rows)} of {seq}")
    kv, q_ = bool(bad["dk"].any() or bad["dv"].any()), bool(bad["dq"].any())
    if kv and not q_:
        loop = ("only the dK/dV loop's gradients hold them (dQ is finite), so the cause is in what computes dK"
                " and dV (`_bwd_dkdv`)")
    elif q_ and not kv:
        loop = ("only dQ holds them (dK and dV are finite), so the cause is in what computes dQ (`_bwd_dq`, or"
                " wherever your dQ is accumulated)")
    elif bool(bad["dv"].any()):
        loop = "both loops' gradients hold them, dV too: dV = P^T dO, so the dK/dV loop's P is NaN/Inf there"
    else:
        loop = "dQ and dK hold them but dV is finite, so the dK/dV loop's P is finite and its dS (dP or D) is not"
    detail = "; ".join(parts) + "; " + loop
    # the rows' largest true scores against exp's fp32 range
    s = launch.ref.s.masked_fill(~launch.ref.allowed, float("-inf"))
    row_max = s.reshape(-1, seq, seq).amax(-1).amax(0)  # (N,) over heads
    col_max = s.reshape(-1, seq, seq).amax(-2).amax(0)
    over_rows, over_cols = row_max > FP32_EXP_LIMIT, col_max > FP32_EXP_LIMIT
    # pairs the mask removes whose score lies past exp's range above the row's lse
    removed = (~launch.ref.allowed) & (launch.ref.s - launch.ref.lse[..., None] > FP32_EXP_LIMIT)
    removed = removed.reshape(-1, seq, seq).any(0)  # (N, N) over heads
    visited = _dkdv_visited_pairs(launch, seq, blocks) if blocks is not None else None
    if (visited is not None and bool((removed & visited).any()) and kv
            and bool(torch.equal(bad["dk"] | bad["dv"], (removed & visited).any(0)))):
        return (f" ({detail}; the keys holding them are exactly the keys that some row may not see and scores more"
                f" than {FP32_EXP_LIMIT:.1f} above its lse in a tile the dK/dV loop visits: exp(s - lse) taken on a"
                " pair the mask removes overflows"
                " to inf there; a mask applied by multiplying turns it into NaN (inf * 0), one left off carries it"
                " into the gradients: remove those pairs with tl.where, before the exp or instead of a multiply)")
    if q_ and bool(torch.equal(bad["dq"], over_rows)):
        detail += (f"; the dQ rows holding them are exactly the rows with a score above {FP32_EXP_LIMIT:.1f}"
                   " (the largest finite exp in fp32): an exp of a score not reduced by lse first overflows")
    elif kv and bool(torch.equal(bad["dk"] | bad["dv"], over_cols)):
        detail += (f"; the keys holding them are exactly the keys some row scores above {FP32_EXP_LIMIT:.1f}"
                   " (the largest finite exp in fp32): an exp of a score not reduced by lse first overflows")
    return f" ({detail})"


def hostile_detail(launch: BackwardLaunch, tolerance: float) -> str:
    """Which gradients the hostile case got wrong (finite), and for a wrong dQ which
    kinds of rows hold its largest relative errors."""
    seq = launch.q.shape[-2]
    kinds = {1: f"rows scoring ~{LARGE_SHIFT:g}", 2: f"rows whose scores rise to {RAMP_SCORE:g} at the last key",
             3: f"rows whose scores fall from {RAMP_SCORE:g} at the first key", 0: "the control rows (usual scores)"}
    wrong = [g for g in GRADS if (launch.per_grad_err[g] or 0.0) > tolerance]
    names = ", ".join(f"{g[0]}{g[1].upper()}" for g in wrong)
    if "dq" not in wrong:
        return f" ({names} past the allowance for its size)"
    err = _bh(launch.grads["dq"].to(torch.float64)) - _bh(launch.ref.grads["dq"])
    scale = _bh(launch.ref.grads["dq"]).abs().amax(-1).clamp(min=1e-9)
    rel = (err.abs().amax(-1) / scale).amax(0)  # (N,) dQ's error relative to the row's size
    worst = {r % 4 for r in rel.topk(min(8, seq)).indices.tolist()}
    rows = "; ".join(kinds[w] for w in sorted(worst))
    return f" ({names} past the allowance for its size; dQ's largest relative errors are in {rows})"


def diagnose(drill: Drill, launches: list[BackwardLaunch], maps: list[VisitMap], block_m: int,
             block_n: int, guard_said: dict[str, str] | None = None, probe: Probe | None = None,
             d_probe: DProbe | None = None, ds_words: DsWords | None = None,
             nan_words: NanWords | None = None) -> list[Diagnosis]:
    """``guard_said``: what the guard bands measured (:func:`guard_report`); NaN that a
    read past the end explains is not said again.  In steps: each failing case's
    findings (:func:`_case_findings`), the cases reconciled (:func:`_reconcile`), the
    loops' visit maps."""
    codes = Findings((guard_said or {}).items())
    generic = Findings()  # said only where nothing more specific is

    def say(code: str, detail: str = "") -> None:
        (generic if code in GENERIC else codes).say(code, detail)

    context = _Cases(
        passed_modes={(x.case.name, x.case.causal) for x in launches if x.case.passed},
        failed_modes={x.case.causal for x in launches if not x.case.passed and x.case.name != "hostile"},
        standard_failed=any(not x.case.passed for x in launches if x.case.name != "hostile"),
    )
    for launch in launches:
        if not launch.case.passed:
            for code, detail in _case_findings(launch, drill.tolerance, block_m, block_n, probe, context, d_probe,
                                               ds_words, nan_words):
                say(code, detail)
    _reconcile(codes, generic, context.explained)
    if not codes or (set(codes) == {"nan-in-output"} and UNSTEADY not in codes["nan-in-output"]):
        # NaN on one case and a finite wrong gradient on another: what the finite one measured is
        # said beside the NaN (blind round 16, 04/w27: a full launch's P read out, a causal one's NaN),
        # unless the NaN is no function of the inputs: then neither is what the finite launch measured
        # (blind round 18, 04/w40: dQ accumulated into a buffer never zeroed, read out as "dP wrong")
        codes.update(generic)
    for code, detail in _loop_findings(drill, launches, maps).items():
        say(code, detail)
    drop_explained_nan(codes)  # the NaN is explained: not the kernel's own arithmetic
    return codes.worded(drill)


@dataclass
class _Cases:
    """What one case's diagnosis needs to know of the others."""

    passed_modes: set[tuple[str, bool]]  # (case name, causal) of the cases that passed
    failed_modes: set[bool]  # causal (True) and/or full (False): the modes some standard case failed in
    standard_failed: bool  # a case other than the hostile one failed
    explained: list[str] = field(default_factory=list)  # each explained launch's code ("" where none fits)


LSE_SLACK = 1e-2  # the fp32 lse of fp16 inputs against float64's, natural units


def _lse_words(launch: BackwardLaunch) -> str:
    """" (<measured>)" where the student's forward stores another lse than the natural log of
    each row's sum (O right): a multiple of it (log2 units: 1.443), or off by up to so much;
    "" where it is the natural log."""
    got = launch.lse.to(torch.float64).reshape(launch.ref.lse.shape)
    ref = launch.ref.lse
    off = float((got - ref).abs().nan_to_num(nan=float("inf")).max())
    if off <= LSE_SLACK:
        return ""
    if bool(torch.isfinite(got).all()) and float((ref * ref).sum()) > 0:
        c = float((got * ref).sum() / (ref * ref).sum())
        if float((got - c * ref).abs().max()) <= LSE_SLACK * max(1.0, abs(c)):
            log2 = " (log2 of the sum)" if abs(c - LOG2E) < 0.01 else ""
            return (f" (O is right; the lse your forward stores is {c:.4g} x the natural log of each row's"
                    f" sum{log2}, off by up to {off:.3g}: the backward's P = exp(qk - lse) is written for the"
                    " natural log)")
    return (f" (O is right; the lse your forward stores is off by up to {off:.3g} from the natural log of each"
            " row's sum, which the backward's P = exp(qk - lse) is written for)")


def _case_findings(launch: BackwardLaunch, tolerance: float, block_m: int, block_n: int, probe: Probe | None,
                   cases: _Cases, d_probe: DProbe | None = None,
                   ds_words: DsWords | None = None, nan_words: NanWords | None = None) -> list[tuple[str, str]]:
    """(code, detail) of one failing case, in the order they are said: the hostile case's
    own, a changed forward, what its outputs show (unwritten, stored out of bounds,
    non-finite), else what the gradients are explained as."""
    case = launch.case
    where = _where(case)
    if case.name == "hostile":
        if cases.standard_failed:
            return []  # the standard cases' diagnosis explains the kernel; this case adds nothing sure
        hostile = _hostile_findings(launch, tolerance, where, (block_m, block_n))
        if hostile is not None:
            return hostile
    if not launch.forward_ok:
        return [("forward-changed", launch.forward_detail + where + ".")]
    lse = _lse_words(launch)
    if lse:  # a forward whose lse is its own, with a backward that fails on it
        return [("forward-changed", lse + where + ".")]
    outputs = _output_findings(launch, where, nan_words, (block_m, block_n))
    if outputs:
        return outputs
    found = explain(launch, tolerance, block_m, block_n, probe, d_probe, ds_words)
    cases.explained.append(found[0] if found is not None else "")
    if found is None:
        return []
    code, detail = found
    if code in GENERIC:
        # one mode wrong and the other right: right on this case's shape and on every other case's
        # (a causal dQ that is wrong on one shape and right by chance on another is no guarded path:
        # blind round 8, w105)
        other_mode = (case.name, not case.causal)
        if other_mode in cases.passed_modes and (not case.causal) not in cases.failed_modes:
            code = "causal-only-wrong" if case.causal else "full-broken"
    return [(code, detail + where)]


def _hostile_findings(launch: BackwardLaunch, tolerance: float, where: str,
                      blocks: tuple[int, int] | None = None) -> list[tuple[str, str]] | None:
    """The large-score case's own finding, or None where it is diagnosed like any case
    (a changed forward, unwritten or out-of-bounds gradients)."""
    case = launch.case
    if not launch.forward_ok or not case.fully_written:
        return None
    if case.nonfinite:
        return [("large-scores-overflow", nonfinite_detail(launch, blocks) + where + ".")]
    return [("large-scores-wrong", hostile_detail(launch, tolerance) + where + ".")]


def _output_findings(launch: BackwardLaunch, where: str, nan_words: NanWords | None = None,
                     blocks: tuple[int, int] | None = None) -> list[tuple[str, str]]:
    """What the gradient buffers show: elements never written, stores past them, NaN/Inf
    (with ``nan_words``' second reading at small scores, where every gradient was written)."""
    case = launch.case
    found = []
    if case.unwritten:
        which = ", ".join(f"{g}: {n}" for g, n in launch.unwritten.items() if n)
        # where the unwritten rows make a pattern (whole heads, or every row from one on), it is said per gradient
        pattern = "".join(f" {g}:{said}" for g, n in launch.unwritten.items()
                          if n and (said := shared.unwritten_words(launch.grads[g])))
        found.append(("unwritten-output", f" ({which} elements never written){where}.{pattern}"))
    if case.wrote_out_of_bounds:
        which = ", ".join(g for g, o in launch.out_of_bounds.items() if o)
        found.append(("store-out-of-bounds", f" ({which}){where}."))
    if case.nonfinite:
        again = nan_words(launch) if nan_words is not None and not case.unwritten else ""
        found.append(("nan-in-output", nonfinite_detail(launch, blocks) + where + "." + again))
    return found


def _reconcile(codes: Findings, generic: Findings, explained: list[str]) -> None:
    """``p-rows-wrong`` only where every explained case says so: where the cases
    disagree, say only what they have in common (dV wrong)."""
    if "p-rows-wrong" in codes and any(code != "p-rows-wrong" for code in explained):
        codes.pop("p-rows-wrong")
        generic.setdefault("dv-wrong", " (dV is wrong on every failing case; the P read out through it is not"
                                       " off in the same way on each.)")


def _loop_findings(drill: Drill, launches: list[BackwardLaunch], maps: list[VisitMap]) -> dict[str, str]:
    """What each loop's visit map says, both loops' details of a code together."""
    failing = any(not x.case.passed for x in launches)
    loops = [(m.label.split(":")[0], m) for m in maps]
    return visit_findings(loops, "causal" in drill.modes, "all-blocks-visited" if failing else "causal-bound-open")


# ------------------------------------------------------------------------------------
# the problem interface
# ------------------------------------------------------------------------------------
def random_case(
    shape: tuple[int, ...], device: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fresh standard-normal fp16 q, k, v and dO."""
    q, k, v, do = launching.random_tensors(shape, device, generator, 4)
    return q, k, v, do


def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One forward and one backward per mode at the default shape, the hostile case's and
    the GPU's head_dim-128 one: every variant the verdict compiles (the ragged and short
    lengths share the default's specialisation; the hostile case's whole-block length,
    divisible by 16, is its own; head_dim 128 its own again), compiled at once on a GPU
    (:func:`tutor.harness.check.compile_concurrently`).  Own seed: the check's random
    stream stays the same with or without them."""
    plan = plan_for(interpreter=False)

    def both(causal: bool, shape: tuple[int, int, int, int], record_visits: bool = True) -> object:
        q, k, v, do = random_case(shape, device, torch.Generator().manual_seed(0))
        o, lse = run_forward(module, q, k, v, causal)
        return run_backward(module, q, k, v, o, lse, do, causal, int(module.BLOCK_M), int(module.BLOCK_N),
                            record_visits=record_visits)

    modes = drill.modes or ["full"]
    # and the default shape's backward without visit maps: a failing case's recheck runs it
    return [*(functools.partial(both, mode == "causal", shape)
              for shape in (plan.default, HOSTILE_SHAPE, plan.whole) for mode in modes),
            *(functools.partial(both, mode == "causal", plan.default, False) for mode in modes)]


def check_correctness(
    drill: Drill,
    module: ModuleType,
    interpreter: bool,
    device: str,
    generator: torch.Generator,
    shape: tuple[int, int, int, int] | None = None,
) -> Correctness:
    for name in (FORWARD, BACKWARD):
        if not callable(getattr(module, name, None)):
            raise shared.BadOutput(f"the drill file defines no {name}() launcher for the tutor to call")
    plan = plan_for(interpreter, backward=True)
    if shape is not None:
        plan = dataclasses.replace(plan, default=(shape[0], shape[1], shape[2], shape[3]))
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    modes = [mode == "causal" for mode in drill.modes] or [False]
    launches: list[BackwardLaunch] = []
    maps: list[VisitMap] = []
    # also a whole-block length at another head_dim: 128 on a GPU (issue 21), 32 on the interpreter
    # (blind round 20, 04/w48: a backward with sm_scale = 0.125, right at 64 alone): a kernel that
    # assumes head_dim 64 fails there
    # (on the interpreter with any default shape: it adds eight small launches)
    extra = [] if shape is not None and not interpreter else [("whole", plan.whole)]

    def recheck() -> bool:
        """Run a failing case again without visit maps?  Only compiled (the interpreter runs
        the same operations either way), and until one case fails without them as well:
        the kernel is then wrong on its own, and each further recheck would cost a compile."""
        return not interpreter and not any(x.failed_without_maps for x in launches)

    for name, case_shape in [*plan.cases(), *extra]:
        q, k, v, do = random_case(case_shape, device, generator)
        for causal in modes:
            cost.step(f"the {name} case, shape {cost.shape_words(case_shape)}, {'causal' if causal else 'full'}"
                      " (forward, then backward)")
            launch = launch_case(name, causal, module, q, k, v, do, drill.tolerance, block_m, block_n,
                                 recheck_plain=recheck())
            launches.append(launch)
            # the maps come from the default shape's causal launch (or its only launch)
            if name == "default" and (causal or len(modes) == 1):
                maps = visit_maps(launch, case_shape[2], block_m, block_n, causal)
    # the hostile case: large scores, a whole number of blocks (issue 21); on every check
    q, k, v, do = hostile_case(device, generator)
    for causal in modes:
        cost.step(f"the hostile case, shape {cost.shape_words(HOSTILE_SHAPE)}, {'causal' if causal else 'full'}"
                  " (scores up to 150; forward, then backward)")
        launches.append(launch_case("hostile", causal, module, q, k, v, do, drill.tolerance, block_m, block_n,
                                    relative=True, recheck_plain=recheck()))

    def probe(launch: BackwardLaunch) -> readout.PReadout | None:
        """The P read-out's probe: one backward launch at the case's own shape, dtypes,
        ints and visit arguments (the variant the case compiled), dO one-hot."""
        cost.step(f"reading out P through dV on the {launch.case.name} case")

        def backward(do: torch.Tensor) -> torch.Tensor:
            return run_backward(module, launch.q, launch.k, launch.v, launch.o, launch.lse, do, launch.case.causal,
                                block_m, block_n)[0]["dv"]

        return readout.read_p(backward, launch.do)

    @functools.cache
    def ds_words() -> str:
        """The dQ loop's dS read out (:func:`readout.describe_ds`) on the shortest failing
        case that one-hot K covers (seq <= head_dim): one forward and one backward at its
        own shapes and dtypes, the variants it compiled; "" where there is none."""
        short = [x for x in launches if not x.case.passed and x.forward_ok and x.case.name != "hostile"
                 and x.q.shape[-2] <= x.q.shape[-1]]
        if not short:
            return ""
        launch = min(short, key=lambda x: x.q.shape[-2])
        cost.step(f"reading out the dQ loop's dS through dQ on the {launch.case.name} case")
        k = readout.one_hot_k(launch.k)
        o, lse = run_forward(module, launch.q, k, launch.v, launch.case.causal)
        grads = run_backward(module, launch.q, k, launch.v, o, lse, launch.do, launch.case.causal, block_m,
                             block_n)[0]
        words = readout.describe_ds(grads["dq"], launch.q, k, launch.v, launch.do, launch.ref.allowed).words
        mode = "causal" if launch.case.causal else "full"
        return words.replace("(one launch at this case's shape)",
                             f"(one launch on the {launch.case.name} case, seq={launch.q.shape[-2]}, {mode})")

    def d_probe(launch: BackwardLaunch, per_head: bool) -> dterm.DTermRead | None:
        """The D-term probe: one backward launch at the case's own shape, dtypes and ints,
        V = 0 and a one-hot dO (dP = 0, D = 2 on the probe rows; ``per_head``: dO and D
        scaled by n + 1 on program n)."""
        cost.step(f"reading out each loop's D term on the {launch.case.name} case"
                  + (", D different per head" if per_head else ""))

        def backward(v: torch.Tensor, o: torch.Tensor, do: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            grads = run_backward(module, launch.q, launch.k, v, o, launch.lse, do, launch.case.causal,
                                 block_m, block_n)[0]
            return grads["dq"], grads["dk"]

        return dterm.read_d_term(backward, launch.v, launch.do, per_head)

    nan_rerun = False  # nan_words runs its case again once a check

    def nan_words(launch: BackwardLaunch) -> str:
        """Non-finite gradients on ordinary scores, run again on the same inputs (a NaN that
        does not come back is said as such), then with q divided by each of
        SMALL_SCORES_DIVISORS until every gradient is finite (one forward, one backward and
        the P probe each, the variants the case compiled): that in words, and the slope of
        the dK/dV loop's P read out through dV there where it is not softmax's (a scale or
        base off by that factor overflows P at ordinary scores: blind round 11, w72 and w84);
        "" where none is finite, and on every case after the first it is asked for: the first
        case's words are the ones said (Findings keeps the first detail of a code)."""
        nonlocal nan_rerun
        if nan_rerun:
            return ""
        nan_rerun = True
        causal = launch.case.causal

        def same_inputs_again() -> dict[str, torch.Tensor]:
            cost.step(f"running the {launch.case.name} case again on the same inputs")
            o, lse = run_forward(module, launch.q, launch.k, launch.v, causal)
            return run_backward(module, launch.q, launch.k, launch.v, o, lse, launch.do, causal, block_m,
                                block_n)[0]
        # the control: the same inputs once more; a NaN that does not come back is no function of the
        # scores, and no smaller scale may be credited with removing it (blind round 13, 04 w40: dQ
        # accumulated with atomic_add into a torch.empty buffer the launcher never zeroed)
        unsteady = _unsteady_nan_words(launch, same_inputs_again())
        if unsteady:
            return unsteady
        for divisor in SMALL_SCORES_DIVISORS:
            cost.step(f"running the {launch.case.name} case again with scores {divisor:g} times smaller")
            q = (launch.q.float() / divisor).to(launch.q.dtype)
            o, lse = run_forward(module, q, launch.k, launch.v, causal)
            grads = run_backward(module, q, launch.k, launch.v, o, lse, launch.do, causal, block_m, block_n)[0]
            if not all(bool(torch.isfinite(g.float()).all()) for g in grads.values()):
                continue
            # and unscaled once more, after it: memory never written may hold other values by now
            unsteady = _unsteady_nan_words(launch, same_inputs_again())
            if unsteady:
                return unsteady
            said = (f" Run again with q divided by {divisor:g} (every score {divisor:g} times smaller), every"
                    f" gradient is finite: the NaN/Inf comes with the scores' size (a value that overflows at"
                    f" ordinary scores and not at smaller ones).")
            small = dataclasses.replace(launch, q=q, o=o, lse=lse,
                                        ref=reference(q, launch.k, launch.v, launch.do, causal))
            read = probe(small)
            shape = (readout.describe(read, small.ref.s, small.ref.lse, small.ref.allowed, block_n, lse)
                     if read is not None else None)
            if shape is not None and shape.slope is not None and abs(shape.slope - 1) > 0.05:
                said += f" There, read out through dV with one-hot dO,{_slope_words(shape.slope, q.shape[-1])}."
            return said
        return ""

    def diagnose_launches() -> Diagnosed:
        findings, said = guard_report(module, launches, block_m, block_n)
        trusted = not shared.visit_map_overrun(findings)  # a map store landed outside it: no block count from it
        if not trusted and "write-past-end" in said:
            said["write-past-end"] += shared.MAP_UNTRUSTED
        diagnosis = diagnose(drill, launches, maps if trusted else [], block_m, block_n, said, probe, d_probe,
                             ds_words, nan_words)
        rechecked = _with_maps_words(launches, drill.tolerance)
        if rechecked:
            diagnosis += worded(drill, {"visit-maps-change-result": rechecked})
        return Diagnosed(diagnosis=diagnosis, guard_findings=findings)

    return Correctness(cases=[x.case for x in launches], shape=list(plan.default), visits=maps,
                       diagnose=diagnose_launches)


def _with_maps_words(launches: list[BackwardLaunch], tolerance: float) -> str:
    """``visit-maps-change-result``'s detail: each case judged by its launch without visit
    maps, and what the launch with them measured; "" where there is none."""
    parts = []
    for x in launches:
        if not x.with_maps_err:
            continue
        # the hostile case holds each element to its own allowance: its errors are in the tolerance's units
        units = (" (in the tolerance's units, each element against its own allowance)" if x.case.name == "hostile"
                 else "")
        wrong = ", ".join(f"{GRAD_BANDS[g]} off by up to {e:.3g}" if e is not None else f"{GRAD_BANDS[g]} not finite"
                          for g, e in x.with_maps_err.items() if e is None or e > tolerance)
        mode = "causal" if x.case.causal else "full"
        parts.append(f"the {x.case.name} case (shape {cost.shape_words(x.case.shape)}, {mode}): with maps {wrong}"
                     f"{units}; without them every gradient within the tolerance")
    if not parts:
        return ""
    return f" Measured, tolerance {tolerance:g}: " + "; ".join(parts) + "."


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    """The backward alone (the forward's O and lse computed once, outside the timed call),
    against torch's SDPA backward on the same inputs."""
    shape = plan_for(interpreter, backward=True).timing
    q, k, v, do = launching.timing_tensors([shape] * 4, device, generator)
    outs = [torch.empty_like(q) for _ in GRADS]
    student: dict[str, Callable[[], object]] = {}
    baseline: dict[str, Callable[[], object]] = {}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for mode in drill.modes or ("full",):
        causal = mode == "causal"
        o, lse = run_forward(module, q, k, v, causal)

        # defaults bind this mode's o, lse and causal (the loop moves on before the launches run)
        def backward(o: torch.Tensor = o, lse: torch.Tensor = lse, causal: bool = causal) -> object:
            return getattr(module, BACKWARD)(q, k, v, o, lse, do, causal=causal, dq=outs[0], dk=outs[1], dv=outs[2])

        student[mode] = backward
        if not interpreter:
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = sdpa(leaves[0], leaves[1], leaves[2], is_causal=causal)

            def sdpa_backward(out: torch.Tensor = out, leaves: list[torch.Tensor] = leaves) -> object:
                return torch.autograd.grad(out, leaves, do, retain_graph=True)

            baseline[mode] = sdpa_backward

    def verify() -> str | None:
        """Each timed backward once more, its first and last (batch, head) of dQ, dK and dV
        against float64 (the timed launches record no visits: a kernel may run another
        configuration there, an autotuned one, than the one the verdict checked)."""
        for mode, run in student.items():
            run()
            for b, h in ((0, 0), (shape[0] - 1, shape[1] - 1)):
                one = (slice(b, b + 1), slice(h, h + 1))
                ref = reference(q[one], k[one], v[one], do[one], causal=mode == "causal")
                for name, got in zip(GRADS, outs, strict=True):
                    want = ref.grads[name]
                    err = float((got[one].to(torch.float64) - want).abs().nan_to_num(nan=float("inf")).max())
                    allowed = drill.tolerance + 0.01 * float(want.abs().max())  # fp16's rounding of large values
                    if not err <= allowed:
                        return (f"the timed {mode} backward (no visit maps passed: the kernel's own configuration,"
                                f" e.g. an autotuned one) is wrong at shape {cost.shape_words(shape)}: {name} of"
                                f" batch {b}, head {h} is off by up to {err:.3g} (allowed {allowed:.3g});"
                                " its times are not shown")
        return None

    return TimedLaunches(shape=list(shape), student=student, baseline=baseline, verify=verify)


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 compile_warmups=compile_warmups)
