"""Numeric facts the read-outs quote: log units and the spacing of a float format.

Kernels that use ``exp2`` multiply scores by log2(e) and keep running maxima and
log-sum-exps in log2 units; the read-outs convert between the two to say which
units a student's kernel worked in, and quote the step a narrow format (fp16)
keeps at a value to say how far a number stored in it can be off.
"""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)
LOG2E = 1.0 / LN2


def spacing_at(x: float, dtype: torch.dtype) -> float:
    """The spacing of ``dtype``'s numbers at ``x`` (its unit in the last place there)."""
    return float(2.0 ** math.floor(math.log2(abs(x))) * torch.finfo(dtype).eps)
