"""Where a decode kernel read its query from, measured (blind round 26, 05 b32: ``Q + off_bh +
offs_d``, the row stride left out, was told only as slice states that differ).

Each wrong (sequence, head) output of a decode launch is compared with attention, against that
pair's own keys and values, of the ``head_dim`` elements of the flat Q tensor that a query offset
``b * A + h * B`` points at, for a few (A, B) a student may write in place of the right
``(heads * head_dim, head_dim)``: a row stride left out or doubled, a head or batch term missing.
Where one (A, B) explains every wrong output within the tolerance, and the right one explains
none, the offset is said.  :func:`attention_gaps`, the comparison itself, also serves drill 07's
test of every other query row (:mod:`paged_diagnose`).
"""

from __future__ import annotations

import torch


def _strides(heads: int, head_dim: int) -> list[tuple[int, int]]:
    """Candidate (per-sequence, per-head) element strides of the q load, the right one excluded."""
    seq_terms = (0, 1, head_dim, heads, heads * head_dim, 2 * heads * head_dim)
    head_terms = (0, 1, head_dim, 2 * head_dim)
    right = (heads * head_dim, head_dim)
    return [(a, b) for a in seq_terms for b in head_terms if (a, b) != right]


def attention_gaps(rows: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, out_row: torch.Tensor) -> torch.Tensor:
    """For each candidate query row of ``rows`` (n, head_dim), the largest difference between
    ``out_row`` and that row's attention (float64, at 1/sqrt(head_dim)) over ``keys`` and
    ``values`` (length, head_dim): a kernel whose q load reads elsewhere computes one of them."""
    rows, keys, values = rows.double().cpu(), keys.double().cpu(), values.double().cpu()
    attended = torch.softmax(rows @ keys.T * rows.shape[-1] ** -0.5, dim=-1) @ values
    return (attended - out_row.double().cpu()).abs().amax(dim=-1)


def query_offset_words(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                       out: torch.Tensor, wrong: list[tuple[int, int]], tolerance: float) -> str:
    """``q`` (batch, heads, head_dim), contiguous as launched; ``k``, ``v`` (batch, heads,
    max_len, head_dim); ``out`` (batch, heads, head_dim); ``wrong``: the (sequence, head) pairs
    off by more than ``tolerance``.  Words naming the query offset that explains every wrong
    output (and is in bounds for each), "" where none does."""
    if not wrong:
        return ""
    batch, heads, head_dim = q.shape
    flat = q.double().cpu().reshape(-1)
    strides = _strides(heads, head_dim)
    fits = torch.ones(len(strides), dtype=torch.bool)
    for b, h in wrong:
        starts = [b * a + h * b_term for a, b_term in strides]
        inside = torch.tensor([start + head_dim <= flat.numel() for start in starts])
        rows = torch.stack([flat[start:start + head_dim] if ok else flat.new_zeros(head_dim)
                            for start, ok in zip(starts, inside.tolist(), strict=True)])
        n = int(lengths[b])
        fits &= inside & (attention_gaps(rows, k[b, h, :n], v[b, h, :n], out[b, h]) <= tolerance)
    fitted = [stride for stride, ok in zip(strides, fits.tolist(), strict=True) if ok]
    if len(fitted) != 1:  # none, or offsets these pairs cannot tell apart (one sequence, say): nothing said
        return ""
    a, b_term = fitted[0]
    terms = [f"{s} * {n}" if n != 1 else s for s, n in (("b", a), ("h", b_term)) if n]
    said = " + ".join(terms) or "0"
    note = " (off_bh itself, without the * HEAD_DIM)" if (a, b_term) == (heads, 1) else ""
    return (f" Every wrong output (sequence b, head h) is, within the tolerance, attention of the {head_dim}"
            f" elements of Q that start at element {said} against its own keys: your q load's offset is"
            f" {said} elements{note}, where b * {heads * head_dim} + h * {head_dim} (the sequence's and the"
            " head's strides, times their indices) belongs.")
