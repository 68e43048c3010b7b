"""Where a decode kernel read its query from, measured (blind round 26, 05 b32: ``Q + off_bh +
offs_d``, the row stride left out, was told only as slice states that differ).

Each wrong (sequence, head) output of a decode launch is compared with attention, against that
pair's own keys and values, of the ``head_dim`` elements of the flat Q tensor that a query offset
``b * A + h * B`` points at, for a few (A, B) a student may write in place of the right
``(heads * head_dim, head_dim)``: a row stride left out or doubled, a head or batch term missing.
Where one (A, B) explains every wrong output within the tolerance, and the right one explains
none, the offset is said.
"""

from __future__ import annotations

import torch


def _strides(heads: int, head_dim: int) -> list[tuple[int, int]]:
    """Candidate (per-sequence, per-head) element strides of the q load, the right one excluded."""
    seq_terms = (0, 1, head_dim, heads, heads * head_dim, 2 * heads * head_dim)
    head_terms = (0, 1, head_dim, 2 * head_dim)
    right = (heads * head_dim, head_dim)
    return [(a, b) for a in seq_terms for b in head_terms if (a, b) != right]


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
    out64 = out.double().cpu()
    scale = head_dim**-0.5

    def attention(b: int, h: int, rows: torch.Tensor) -> torch.Tensor:
        n = int(lengths[b])
        keys, values = k[b, h, :n].double().cpu(), v[b, h, :n].double().cpu()
        return torch.softmax(rows @ keys.T * scale, dim=-1) @ values

    def fits(a: int, b_term: int) -> bool:
        for b, h in wrong:
            start = b * a + h * b_term
            if start + head_dim > flat.numel():
                return False
            got = attention(b, h, flat[start:start + head_dim][None, :])[0]
            if float((got - out64[b, h]).abs().max()) > tolerance:
                return False
        return True

    fitted = [(a, b_term) for a, b_term in _strides(heads, head_dim) if fits(a, b_term)]
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
