"""The numeric facts the read-outs quote."""

import math

import torch

from tutor.harness.numerics import LN2, LOG2E, spacing_at


def test_log_units_are_inverse() -> None:
    assert math.isclose(LN2 * LOG2E, 1.0)
    assert math.isclose(math.exp2(LOG2E), math.e)


def test_spacing_is_the_formats_step_at_the_value() -> None:
    assert spacing_at(1.0, torch.float16) == 2.0**-10
    assert spacing_at(-1.5, torch.float16) == 2.0**-10
    assert spacing_at(173.0, torch.float16) == 0.125  # 128 <= 173 < 256: 2^7 * 2^-10
    assert spacing_at(173.0, torch.bfloat16) == 1.0  # 2^7 * 2^-7
    x = torch.tensor(173.0, dtype=torch.float16)
    assert float(torch.nextafter(x, torch.tensor(1e4, dtype=torch.float16)) - x) == spacing_at(173.0, torch.float16)
