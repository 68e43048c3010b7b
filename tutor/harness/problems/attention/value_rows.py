"""Whether a read-out's weights sit on the value rows of their own keys.

One-hot V reads out, for each query row, the weight its output gives each *value
row*.  A kernel that loads V at other rows than K (one row late, a block back) or
drops some of V's rows (a mask on the V load that is not K's) moves or removes that
weight, and the read-out alone would show it as keys seen where they may not be, or
missed.  The scores tell them apart:

- a softmax weight follows its own key's score: where log(weight) on value row c
  follows the score of key c - shift (one constant per row) and not key c's own,
  the weight of key j sits on value row j + shift (:func:`shifted_values`);
- a mask that removes keys renormalises the rest (their weights grow); values read
  as 0 do not, nor does a share of acc lost while the sum l kept it: where the
  weights on the value rows that have any are softmax's own over the whole window
  and other keys' weight is simply missing, those keys were weighed and added
  nothing to the output (:func:`dropped_values`).

Both are said only where every row read supports them.
"""

from __future__ import annotations

import torch

from tutor.harness.findings import index_runs

MEASURABLE = 1e-3  # a weight worth reading (the read-out's weights are ~1/WINDOW)
MIN_ROWS = 4  # finite rows with weight that a match must hold on


def shifted(t: torch.Tensor, shift: int, dim: int = -1) -> torch.Tensor:
    """t moved ``shift`` places along ``dim``: index c holds t's index c - shift (0 where that
    is outside)."""
    out = torch.zeros_like(t)
    n = t.shape[dim]
    if abs(shift) >= n:
        return out
    if shift >= 0:
        out.narrow(dim, shift, n - shift).copy_(t.narrow(dim, 0, n - shift))
    else:
        out.narrow(dim, 0, n + shift).copy_(t.narrow(dim, -shift, n + shift))
    return out


def _close(weights: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Entry by entry: is the measured weight softmax's (float64 against the kernel's fp16
    output: 1e-3 plus 2 % of the weight)?"""
    return (weights - probs).abs() <= 1e-3 + 0.02 * probs


def _rows(weights: torch.Tensor) -> torch.Tensor:
    """The rows a match is read on: finite, with some weight."""
    return torch.isfinite(weights).all(-1) & (weights.nan_to_num(0.0) > MEASURABLE).any(-1)


def _matches(weights: torch.Tensor, probs: torch.Tensor, shift: int, min_keys: int) -> bool:
    """Is every finite row's read-out softmax's weights moved by ``shift`` value rows (the
    weight of key j on value row j + shift; a key moved past either end gives its weight to
    nothing), with MIN_ROWS rows or more that weigh ``min_keys`` keys or more?  A row of one
    key weighs it 1 whatever its score: it shows where the weight went, not whose it is."""
    rows = _rows(weights)
    decisive = rows & ((weights.nan_to_num(0.0) > MEASURABLE).sum(-1) >= min_keys)
    if int(decisive.sum()) < MIN_ROWS:
        return False
    return bool(_close(weights, shifted(probs, shift))[rows].all())


def shifted_values(weights: torch.Tensor, probs: torch.Tensor, most: int, min_keys: int = 2) -> int | None:
    """The one shift (|shift| <= ``most``, not 0) by which every key's weight sits off its own
    value row, where the weights are softmax's moved by that shift and are not softmax's
    in place; else None.  ``weights``: the read-out, (rows, seq, value rows); ``probs``: the
    true softmax over each row's keys, float64, same shape.  ``min_keys`` = 1 lets rows of
    one key decide: a window moved by as much fits that too (see :func:`_matches`)."""
    if _matches(weights, probs, 0, min_keys):
        return None
    # the one shift worth trying over every row: the one that brings softmax's weights closest to
    # the measured ones on a row none of whose weight moved out (an argmax would do, but the
    # read-out's weights are nearly even and fp16 ties them)
    w, p = weights.reshape(-1, weights.shape[-1]), probs.reshape(-1, probs.shape[-1])
    rows = _rows(weights).flatten()
    whole = rows & ((w.nan_to_num(0.0).sum(-1) - 1).abs() < 0.01)
    picked = (whole if bool(whole.any()) else rows).nonzero().flatten()
    if picked.numel() == 0:
        return None
    row_w, row_p = w[int(picked[0])], p[int(picked[0])]
    shift = min((s for s in range(-most, most + 1) if s), key=lambda s: float((row_w - shifted(row_p, s)).abs().sum()))
    return shift if _matches(weights, probs, shift, min_keys) else None


def shifted_words(shift: int) -> str:
    """:func:`shifted_values`'s finding in words."""
    rows = f"{abs(shift)} row{'s' if abs(shift) > 1 else ''} {'after' if shift > 0 else 'before'}"
    sign = "+" if shift > 0 else "-"
    return (f" Read out through one-hot V, the weight of each key j sits on value row j {sign} {abs(shift)}: on every"
            f" row read, the weights are softmax's over the row's own window, each moved {rows} its key (and"
            " not softmax's in place). The keys are weighed as softmax weighs them; the values are read"
            f" {rows} their keys: V's load does not use the rows K's load uses (its offsets or its base).")


def dropped_values(weights: torch.Tensor, probs: torch.Tensor) -> list[int]:
    """Rows (flattened over the read-out's first dimension and seq) where some keys' weight is
    missing while every weight that is there is softmax's own over the whole window, not
    renormalised over fewer keys: those keys' values read as 0.  [] where any finite row's
    weights are not softmax's own where present (a renormalised softmax over fewer keys,
    another temperature), or no weight is missing."""
    rows = _rows(weights)
    if int(rows.sum()) < MIN_ROWS:
        return []
    w = weights.nan_to_num(0.0)
    gone = w.abs() < 0.1 * MEASURABLE
    if not bool((_close(w, probs) | gone)[rows].all()):
        return []
    lost = rows & ((probs > MEASURABLE) & gone).any(-1) & (w.sum(-1) < 0.99)
    return lost.flatten().nonzero().flatten().tolist()


def dropped_words(weights: torch.Tensor, probs: torch.Tensor, rows: list[int]) -> str:
    """:func:`dropped_values`'s finding in words, with the first row's keys."""
    seq = weights.shape[-1]
    first = rows[0]
    flat_w, flat_p = weights.reshape(-1, seq)[first], probs.reshape(-1, seq)[first]
    keys = ((flat_p > MEASURABLE) & (flat_w.abs() < 0.1 * MEASURABLE)).nonzero().flatten().tolist()
    total = float(flat_w.sum())
    return (f" Read out through one-hot V, {len(rows)} rows' weights add up to less than 1 (row {first % seq}:"
            f" {total:.3g}), and on the value rows that have weight they are softmax's own over the whole window,"
            " not renormalised over fewer keys: the keys whose weight is missing (row"
            f" {first % seq}: keys {index_runs(keys)}) were weighed, and what they add to the output is 0. A mask"
            " that removed them from the scores would have given the others their weight; here their values read"
            " as 0 (V's load drops them: its mask or its rows are not K's), or what they added to acc was lost"
            " while the sum l kept their share (acc reset or overwritten in the loop).")
