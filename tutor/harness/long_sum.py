"""The long-sum case, shared by the forward drills: inputs that overflow an fp16 running sum.

Every score is 0 (q = 0: each row weighs the keys it sees evenly, p = 1 exactly) and V's
column 0 is ``LONG_SUM_V`` for every key, so the exact output there is ``LONG_SUM_V`` while a
row's running sum of p·v grows to ``LONG_SUM_V`` times the keys it sees: past fp16's largest
value (65504) from 128 keys on.  An accumulator kept in fp16 overflows there (to Inf), where
standard-normal inputs never come near it.  Each drill's problem module launches such a case
with its own shape and mask and hands :func:`long_sum_words` the keys each row sees.
"""

from __future__ import annotations

import torch

from tutor.harness.findings import index_runs

LONG_SUM_V = 512.0  # V[..., 0] of the long-sum case: 128 keys of it sum to 65536, past fp16's 65504
FP16_MAX = 65504.0
KEYS_PAST_FP16 = int(FP16_MAX // LONG_SUM_V) + 1  # 128: the fewest keys whose sum passes 65504


def long_sum_values(v: torch.Tensor) -> torch.Tensor:
    """``v`` with its column 0 set to ``LONG_SUM_V`` everywhere (a copy)."""
    v = v.clone()
    v[..., 0] = LONG_SUM_V
    return v


def causal_keys(seq: int, causal: bool) -> torch.Tensor:
    """The keys each of ``seq`` rows sees: 1..seq under a causal mask, else seq."""
    return torch.arange(1, seq + 1) if causal else torch.full((seq,), seq)


def long_sum_words(out: torch.Tensor, expected: torch.Tensor, keys: torch.Tensor, tolerance: float, case: str) -> str:
    """``long-sum-wrong``'s measured detail: which rows of column 0 went wrong, and whether they are
    exactly the rows whose sum of p·v passes fp16's largest value.  ``out`` and ``expected`` are
    (..., rows, head_dim), the rows on the second-to-last axis; ``keys`` (rows,) the keys each row
    sees; ``case`` the case as the message names it ("the long-sum causal case (seq=136)")."""
    rows_n = out.shape[-2]
    col = out[..., 0].to(torch.float64).reshape(-1, rows_n)
    gap = (col - expected[..., 0].to(torch.float64).reshape(-1, rows_n)).abs().nan_to_num(nan=float("inf"))
    bad = (gap > tolerance).any(dim=0).cpu()  # per row, over the other axes
    others = (out[..., 1:].to(torch.float64) - expected[..., 1:].to(torch.float64)).abs().nan_to_num(nan=float("inf"))
    rest_right = bool((others <= tolerance).all())
    past = keys.cpu() * LONG_SUM_V > FP16_MAX
    rows = bad.nonzero().flatten().tolist()
    if not rows:
        return ""
    how = "Inf/NaN" if not bool(torch.isfinite(col[:, bad]).any()) else "wrong"
    words = (f" Measured on {case}: column 0 comes out {how} in {len(rows)} of {rows_n} rows"
             f" (rows {index_runs(rows)}), where the exact output is {LONG_SUM_V:g}")
    # fp16's overflow is Inf: only a non-finite column 0 in exactly the rows past 65504 (every other value right)
    # says the running sum is fp16 - where every row passes 65504, the rows alone would say little
    if how == "Inf/NaN" and bool((bad == past).all()) and rest_right:
        words += (f"; they are exactly the rows that see {KEYS_PAST_FP16} keys or more, whose running sum of p·v"
                  f" passes 65504, fp16's largest value ({KEYS_PAST_FP16} × {LONG_SUM_V:g} ="
                  f" {KEYS_PAST_FP16 * LONG_SUM_V:g}), and every other row and every other column is right: the"
                  " running sum (acc) is kept in fp16 - keep acc and l_i in fp32 and cast only the final output.")
    else:
        words += "."
    return words
