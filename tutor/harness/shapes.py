"""The shapes a check runs, per device.

Correctness runs three shapes: the default one, one whose length leaves a
ragged last block of a single row, and one shorter than a block; the forward
drills also run a fourth, ``whole``, whose length is a multiple of every block
size up to 128 (no ragged block at all; on a GPU with head_dim 128, so a kernel
that assumes 64 fails there); the hostile
case (:mod:`tutor.harness.problems.attention.hostile`) runs its own, on the interpreter a smaller
one (three K/V blocks of 64, the last one ragged: enough for a maximum that
arrives late) so that it adds little to a check.  Timing runs
one shape: on a GPU it must fill the chip several waves deep, or a correct
causal kernel shows no speed-up (the default 2x8x1000x64 is one wave on an
H200: the last query blocks, which do the most work, set the time); on the
interpreter it is the default shape, and the times are relative only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

Shape = tuple[int, int, int, int]  # batch, heads, seq, head_dim


@dataclass(frozen=True)
class ShapePlan:
    default: Shape
    ragged: Shape
    short: Shape
    timing: Shape
    hostile: Shape
    whole: Shape  # a block-multiple length (head_dim 128 on a GPU): the forward drills' fourth case

    def cases(self) -> list[tuple[str, Shape]]:
        return [("default", self.default), ("ragged", self.ragged), ("short", self.short)]


GPU_PLAN = ShapePlan(
    default=(2, 8, 1000, 64),
    ragged=(1, 2, 129, 64),
    short=(1, 1, 37, 64),
    timing=(4, 16, 4096, 64),
    hostile=(2, 8, 1000, 64),
    whole=(1, 2, 1024, 128),
)

CPU_PLAN = ShapePlan(
    default=(1, 2, 200, 64),  # 4 blocks of 64, the last one 8 rows: ~0.15 s per launch
    ragged=(1, 2, 129, 64),
    # two sequences of one head: a grid or base offset that forgets the batch leaves the second
    # unwritten (every other CPU case holds one sequence); one block each, so cheap
    short=(2, 1, 37, 64),
    timing=(1, 2, 200, 64),
    hostile=(1, 1, 136, 64),
    # two blocks of 64 keys at head_dim 32: a stride or a tile that assumes head_dim = 64 (or =
    # BLOCK_N) fails here, as it does on a GPU's head_dim-128 case
    whole=(1, 1, 128, 32),
)


# Drill 04's backward runs four kernels per case (forward, preprocess, dK/dV, dQ), a
# verdict of 40 interpreted launches (five cases, two modes; its whole case too, since
# blind round 20): on the interpreter its ragged case keeps one head.
# The default case still holds two (a per-head offset is checked there) and the ragged
# case still ends on a one-row block; one head less is ~0.15 s of a ~1 s CPU verdict.
BACKWARD_CPU_PLAN = replace(CPU_PLAN, ragged=(1, 1, 129, 64))


def plan_for(interpreter: bool, backward: bool = False) -> ShapePlan:
    """The shapes of a check on this device; ``backward``: drill 04's (attention_backward)."""
    if not interpreter:
        return GPU_PLAN
    return BACKWARD_CPU_PLAN if backward else CPU_PLAN


# a length that is a multiple of every power-of-two block size up to this
WHOLE_BLOCKS = 256


def whole_block_shape(interpreter: bool) -> Shape:
    """The default shape with its length rounded up to a multiple of WHOLE_BLOCKS:
    a kernel that crashes only on ragged lengths runs this one to the end."""
    batch, heads, seq, head_dim = plan_for(interpreter).default
    return (batch, heads, -(-seq // WHOLE_BLOCKS) * WHOLE_BLOCKS, head_dim)
