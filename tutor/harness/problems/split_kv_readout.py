"""Drill 05's two kernels tested apart: the split kernel's slice states against the
reference's, and the merge kernel alone on partial states the tutor chooses.

The launcher contract (``attention(q, k_cache, v_cache, lengths, out=, visits=)``)
hides the two kernels inside one call, so the harness cannot call them from
outside.  Instead, while a correctness launch runs, :func:`recording` swaps every
Triton kernel the module defines (module attributes: the launcher reads them as
module globals) for a thin proxy that launches the real kernel and notes the
grid and the arguments.  Afterwards :func:`find_roles` picks out, by the tensors
they share, the split launch (it reads the K cache) and the merge launch (it
writes the output), and the slice states the one writes and the other reads
(float32 tensors passed to both).  A kernel that another kernel calls from
inside is never swapped (its callers' compile would see a proxy), and a
launcher with one fused kernel has no split/merge pair: then nothing here runs.

* :func:`split_report` compares the states the split launch wrote (a copy taken
  right after it ran) with the reference's per slice (the partition is the one
  the visit map measured): which convention the kernel stores (m or lse, base 2
  or e, o normalised or not) and, where no convention fits, which slices of
  which sequences are off, in which field, by what factor, and what they share.
* :func:`merge_probe` re-launches the recorded merge with the same grid, int
  and constexpr arguments and tensors of the same shapes, dtypes and
  alignment (so it reuses the variant the correctness launch compiled), its
  state tensors filled with the tutor's states in the kernel's own convention:
  each slice's normalised answer a one-hot vector e_s, so the output's
  component s *is* the weight the merge gave slice s.  Rows mix slices of one
  maximum and different sums, a maximum held by a slice of few keys, empty
  slices, maxima near 300 (2^300 overflows fp32) and drops of 200 between
  slices (past fp32's exp2 range).  The weights are compared with each slice's
  share of the mass, l_s 2^(m_s - M) / sum_t l_t 2^(m_t - M) (= 2^(lse_s - LSE)).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from tutor.harness.numerics import LN2, LOG2E


# -- recording the launcher's kernel launches ---------------------------------------------
@dataclass(eq=False)  # calls are told apart by identity (their tensors have no truth value)
class KernelCall:
    name: str
    grid: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    after: dict[int, torch.Tensor] = field(default_factory=dict)  # arg position -> fp32 copy right after the call
    before: dict[int, torch.Tensor] = field(default_factory=dict)  # the same tensors' copies right before it
    arg_names: list[str] = field(default_factory=list)  # the kernel's parameter names, in order

    def unchanged(self, pos: int) -> bool:
        """Did the launch leave the fp32 tensor at ``pos`` as it was: every value the same (0
        and -0 alike: a state rescaled by 0 stores -0 where its terms were negative, blind
        round 10, 07 w51) and NaN wherever a NaN was?"""
        if pos not in self.before or pos not in self.after:
            return False
        before, after = self.before[pos], self.after[pos]
        return bool(((after == before) | (after.isnan() & before.isnan())).all())

    def arg_name(self, pos: int) -> str:
        return self.arg_names[pos] if pos < len(self.arg_names) else f"argument {pos + 1}"


def _float32_copies(args: tuple[Any, ...]) -> dict[int, torch.Tensor]:
    return {i: a.detach().clone() for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.dtype == torch.float32 and a.numel() <= 1 << 24}


def _unwrapped(kernel: Any, attr: str) -> Any:
    """The Triton kernel object that has ``attr``, through autotuner or heuristics wrappers."""
    while not hasattr(kernel, attr) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return kernel


def _arg_names(kernel: Any) -> list[str]:
    """A Triton kernel's parameter names."""
    return list(getattr(_unwrapped(kernel, "arg_names"), "arg_names", []))


# a NaN payload no arithmetic produces (a computed NaN is 0x7FC00000): fp32 bits a store replaces
MARKER_BITS = 0x7FBADBAD


class _Recorded:
    """A Triton kernel that notes each launch (``kernel[grid](...)``) and passes through;
    the fp32 tensors at ``poison`` positions are filled with :data:`MARKER_BITS` first."""

    def __init__(self, name: str, kernel: Any, log: list[KernelCall], poison: frozenset[int] = frozenset()) -> None:
        self._name, self._kernel, self._log, self._poison = name, kernel, log, poison

    def __getitem__(self, grid: Any) -> Any:
        launch = self._kernel[grid]

        def call(*args: Any, **kwargs: Any) -> Any:
            for i in self._poison:
                if i < len(args) and isinstance(args[i], torch.Tensor) and args[i].dtype == torch.float32:
                    args[i].view(torch.int32).fill_(MARKER_BITS)
            before = _float32_copies(args)
            value = launch(*args, **kwargs)
            self._log.append(KernelCall(self._name, grid, args, kwargs, _float32_copies(args), before,
                                        _arg_names(self._kernel)))
            return value

        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._kernel(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._kernel, attr)


def launchable_kernels(module: ModuleType) -> dict[str, Any]:
    """The module's launchable Triton kernels that no other kernel of it calls."""
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:  # pragma: no cover - triton always has it
        return {}
    found = {name: obj for name, obj in vars(module).items() if isinstance(obj, KernelInterface)}

    sources = {name: str(getattr(_unwrapped(obj, "src"), "src", "")) for name, obj in found.items()}
    return {name: obj for name, obj in found.items()
            if not any(name in text for other, text in sources.items() if other != name)}


@contextlib.contextmanager
def recording(module: ModuleType, log: list[KernelCall], poison: dict[str, frozenset[int]] | None = None,
              ) -> Iterator[None]:
    """Each launch of the module's kernels noted in ``log``; ``poison``: kernel name -> the
    argument positions filled with :data:`MARKER_BITS` right before each of its launches."""
    kernels = launchable_kernels(module)
    for name, kernel in kernels.items():
        setattr(module, name, _Recorded(name, kernel, log, (poison or {}).get(name, frozenset())))
    try:
        yield
    finally:
        for name, kernel in kernels.items():
            setattr(module, name, kernel)


# -- which launch is which -----------------------------------------------------------------
def _ptr(t: torch.Tensor) -> int:
    return int(t.data_ptr())


FieldKey = tuple[int, int]  # (merge arg position of a scalar state tensor, which of its interleaved fields)


@dataclass(frozen=True)
class Layout:
    """How a state tensor lays out its axes in memory, outermost first: r (sequence*head),
    s (slot), f (one of the scalar fields packed side by side), d (head_dim)."""

    order: str

    @property
    def _canon(self) -> str:
        return "rsd" if "d" in self.order else "frs"

    def canonical(self, flat: torch.Tensor, sizes: dict[str, int]) -> torch.Tensor:
        """(fields, rows, slots) for scalars, (rows, slots, head_dim) for the vector."""
        t = flat.reshape([sizes[a] for a in self.order])
        return t.permute([self.order.index(a) for a in self._canon])

    def flatten(self, canon: torch.Tensor) -> torch.Tensor:
        return canon.permute([self._canon.index(a) for a in self.order]).reshape(-1)


ROW_MAJOR = {"scalar": Layout("rsf"), "vector": Layout("rsd")}


def scalar_layouts(fields: int) -> list[Layout]:
    """Row-major first; two packed fields may sit innermost, outermost or between."""
    if fields == 1:
        return [Layout("rsf"), Layout("srf")]
    return [Layout(o) for o in ("rsf", "frs", "rfs", "srf", "fsr", "sfr")]


VECTOR_LAYOUTS = [Layout("rsd"), Layout("srd")]


@dataclass
class Roles:
    split: KernelCall
    merge: KernelCall
    tensors: list[int]  # merge arg positions of the per-slot scalar state tensors
    fields: dict[int, int]  # scalar tensor position -> how many fields it packs (1 or 2)
    vector: int  # merge arg position of the per-slot vector state (rows * slots * head_dim)
    split_pos: dict[int, int]  # merge arg position -> the same tensor's position in the split's args
    slots: int
    rows: int
    head_dim: int
    layouts: dict[int, Layout] = field(default_factory=dict)  # tensor position -> layout (default: row-major)

    @property
    def scalars(self) -> list[FieldKey]:
        return [(pos, f) for pos in self.tensors for f in range(self.fields[pos])]

    def sizes(self, pos: int) -> dict[str, int]:
        return {"r": self.rows, "s": self.slots, "f": self.fields.get(pos, 1), "d": self.head_dim}

    def layout(self, pos: int) -> Layout:
        return self.layouts.get(pos, ROW_MAJOR["vector" if pos == self.vector else "scalar"])


def find_roles(calls: list[KernelCall], k: torch.Tensor, out: torch.Tensor, bh: int, head_dim: int) -> Roles | None:
    def tensors(call: KernelCall) -> dict[int, torch.Tensor]:
        return {i: a for i, a in enumerate(call.args) if isinstance(a, torch.Tensor)}

    # one launch writes the output and one reads the cache: a launcher that launches either
    # kernel several times (per sequence, say) is not taken apart
    writers = [c for c in calls if any(_ptr(t) == _ptr(out) for t in tensors(c).values())]
    readers = [c for c in calls if c not in writers and any(_ptr(t) == _ptr(k) for t in tensors(c).values())]
    if len(writers) != 1 or len(readers) != 1:
        return None
    merge, split = writers[0], readers[0]
    in_split = {_ptr(t): i for i, t in tensors(split).items() if t.dtype == torch.float32}
    shared: dict[int, int] = {}
    seen: set[int] = set()
    for i, t in tensors(merge).items():  # one position per tensor (a launcher may pass one tensor twice)
        if t.dtype == torch.float32 and in_split.get(_ptr(t), -1) in split.after and _ptr(t) not in seen:
            shared[i] = in_split[_ptr(t)]
            seen.add(_ptr(t))
    vectors = [i for i in shared if merge.args[i].numel() % (bh * head_dim) == 0 and merge.args[i].numel() > 0]
    if not vectors:
        return None
    vector = max(vectors, key=lambda i: merge.args[i].numel())
    slots = merge.args[vector].numel() // (bh * head_dim)
    fields = {i: merge.args[i].numel() // (bh * slots) for i in shared
              if i != vector and merge.args[i].numel() in (bh * slots, 2 * bh * slots)}
    if not fields or not all(merge.args[i].is_contiguous() for i in [*fields, vector]):
        return None
    return Roles(split, merge, list(fields), fields, vector, shared, slots, bh, head_dim)


def narrow_states(calls: list[KernelCall], k: torch.Tensor, out: torch.Tensor) -> list[tuple[str, torch.dtype]]:
    """The tensors the split launch (the one that reads the cache ``k``) shares with the merge
    launch (the one that writes ``out``) that are fp16 or bf16, by the split's parameter name:
    states kept narrower than float32 (which :func:`find_roles` does not take apart)."""
    writers = [c for c in calls if any(isinstance(a, torch.Tensor) and _ptr(a) == _ptr(out) for a in c.args)]
    readers = [c for c in calls if c not in writers
               and any(isinstance(a, torch.Tensor) and _ptr(a) == _ptr(k) for a in c.args)]
    if len(writers) != 1 or len(readers) != 1:
        return []
    in_merge = {_ptr(a) for a in writers[0].args if isinstance(a, torch.Tensor)}
    split = readers[0]
    return [(split.arg_name(i), a.dtype) for i, a in enumerate(split.args)
            if isinstance(a, torch.Tensor) and _ptr(a) in in_merge and _ptr(a) != _ptr(k)
            and a.dtype in (torch.float16, torch.bfloat16)]


Rerun = Callable[[dict[str, frozenset[int]]], list[KernelCall]]  # the same launch, those args poisoned


def unwritten_states(roles: Roles, rerun: Rerun) -> tuple[str, str]:
    """(code, words) for the state tensors the merge reads that the split launch left value
    for value as they were ("" , "" where it changed each, or stored nothing non-empty anywhere: a
    split whose every slice is empty stores (-inf, 0, 0), which memory the allocator hands
    back may already hold).  Which of two causes, measured by ``rerun``, the same launch with
    those tensors filled with a marker no arithmetic makes: still the marker everywhere, no
    store reaches them (``states-unwritten``); replaced, the split stores there only the values
    the launcher put there (``states-unchanged``: a quantity never moved from its start)."""
    split = roles.split
    states = [roles.split_pos[pos] for pos in [*roles.tensors, roles.vector]]
    left = [pos for pos in states if split.unchanged(pos)]
    # a finite, non-zero value in a state the launch did change: some slice stored a non-empty state
    stored_some = any(bool((torch.isfinite(split.after[pos]) & (split.after[pos] != 0)).any())
                      for pos in states if pos not in left)
    if not left or not stored_some:
        return "", ""
    again = next((c for c in rerun({split.name: frozenset(left)}) if c.name == split.name), None)
    if again is None:
        return "", ""
    never = [pos for pos in left if pos in again.after
             and bool((again.after[pos].view(torch.int32) == MARKER_BITS).all())]
    named = " and ".join(_state_words(split, pos) for pos in (never or left))
    it = "them" if len(never or left) > 1 else "it"
    partly = [(pos, int((again.after[pos].view(torch.int32) == MARKER_BITS).sum())) for pos in left
              if pos in again.after and pos not in never]
    partly = [(pos, kept) for pos, kept in partly if kept]
    if not never and partly:  # (blind round 14, w13: the o_s store leaves out the slice; the last slice's zeros win)
        pos, kept = partly[0]
        return "states-unwritten", (
            f" Your split kernel ({split.name}) left {_state_words(split, pos)} value for value as the launcher"
            f" passed it; launched again with it filled with a marker (a NaN pattern no arithmetic makes), {kept}"
            f" of its {again.after[pos].numel()} values still held the marker: no store of the split kernel"
            f" reaches them, yet your merge kernel ({roles.merge.name}) reads them - look at the offsets of the"
            " store to it (its slice part, say).")
    if never:
        return "states-unwritten", (
            f" Your split kernel ({split.name}) left {named} value for value as the launcher passed {it}; launched"
            f" again with {it} filled with a marker (a NaN pattern no arithmetic makes), every value still held the"
            f" marker: no store of the split kernel reaches {it}, yet your merge kernel ({roles.merge.name})"
            f" reads {it}.")
    if not all(_one_value(split.after[pos]) for pos in left):
        # stored values that vary yet match what the buffer held: the same states a launch before
        # this one left in memory the allocator handed back (a fixed seed), not a quantity never moved
        return "", ""
    return "states-unchanged", (
        f" Your split kernel ({split.name}) stores to {named}, but only the values the launcher put there:"
        f" launched again with {it} filled with a marker, the marker was replaced, and on the check's own launch"
        f" {it} came out value for value as {it} went in, while its other states hold slices that read something.")


def _overlap_span(roles: Roles) -> int:
    """The elements every (sequence*head, slot) state covers when each is stored at its index,
    not index * head_dim: one element apart, head_dim long."""
    return roles.rows * roles.slots + roles.head_dim - 1


def vector_coverage_words(roles: Roles, written: torch.Tensor) -> tuple[str, bool]:
    """What the split's stores covered of the vector state tensor (``written``: flat bool, the
    elements a marker launch found replaced), where they left part of it ("" where every
    element was written); and whether one cause explains exactly that coverage: every
    (sequence*head, slot) state stored at its index, not at index * head_dim."""
    size, count = written.numel(), int(written.sum())
    if count >= size:
        return "", False
    name = roles.split.arg_name(roles.split_pos[roles.vector])
    prefix = bool(written[:count].all())
    words = (f" Of the {size} elements of the vector state tensor it shares with the merge ({name}), it wrote"
             f" {count}" + (f", the first {count} in a row" if prefix else "") + ".")
    states = roles.rows * roles.slots
    explained = prefix and count == _overlap_span(roles)
    if explained:
        words += (f" That is exactly what {states} states of {roles.head_dim} values cover when each starts one"
                  f" element after the last instead of {roles.head_dim}: its store's state offset is not"
                  " multiplied by head_dim, so each state overwrites most of the one before.")
    return words, explained


def overlapping_states(roles: Roles, rerun: Rerun) -> tuple[str, str]:
    """``states-unwritten`` where the split, launched again with its vector state filled with a
    marker, replaced exactly the elements that states stored one element apart cover
    (:func:`vector_coverage_words`); ("", "") otherwise."""
    split = roles.split
    pos = roles.split_pos[roles.vector]
    if pos not in split.before or pos not in split.after:
        return "", ""
    changed = (split.after[pos] != split.before[pos]).reshape(-1)
    if bool(changed[_overlap_span(roles):].any()):  # the check's own launch stored past that: no launch to ask
        return "", ""
    again = next((c for c in rerun({split.name: frozenset([pos])}) if c.name == split.name), None)
    if again is None or pos not in again.after:
        return "", ""
    written = (again.after[pos].view(torch.int32) != MARKER_BITS).cpu().reshape(-1)
    words, explained = vector_coverage_words(roles, written)
    if not explained:
        return "", ""
    return "states-unwritten", (f" Your split kernel ({split.name}), launched again with its vector state filled"
                                " with a marker (a NaN pattern no arithmetic makes), replaced only part of the"
                                f" marker; your merge kernel ({roles.merge.name}) reads the rest too." + words)


def _one_value(t: torch.Tensor) -> bool:
    """Does ``t`` hold one value throughout (NaN counting as one value)?"""
    flat = t.flatten()
    return flat.numel() == 0 or bool(((flat == flat[0]) | (flat.isnan() & flat[0].isnan())).all())


def _state_words(call: KernelCall, pos: int) -> str:
    held = call.after[pos]
    values = torch.unique(held.flatten()).tolist() if 0 < held.numel() <= 4096 else []
    what = f", every value {values[0]:g}" if len(values) == 1 else ""
    return f"{call.arg_name(pos)} ({held.numel()} values{what})"


# -- the reference's slice states -------------------------------------------------------------
@dataclass
class SliceStates:
    """float64, (bh, slots) and (bh, slots, head_dim); empty slots: m = -inf, sums (l) = 0, o = 0."""

    m: torch.Tensor  # natural-log maximum
    sums: torch.Tensor
    o: torch.Tensor  # unnormalised
    positions: torch.Tensor  # (bh, slots) how many positions each slot holds
    first: torch.Tensor  # (bh, slots) its first position (-1: empty)
    last: torch.Tensor

    def kind(self, name: str) -> torch.Tensor:
        nonempty = self.sums > 0
        safe_l = torch.where(nonempty, self.sums, torch.ones_like(self.sums))
        lse = torch.where(nonempty, self.m + torch.log(safe_l), self.m)
        table = {"m2": self.m * LOG2E, "m": self.m, "lse2": lse * LOG2E, "lse": lse, "l": self.sums,
                 "o": self.o, "o/l": self.o / safe_l[..., None]}
        return table[name]


SCALAR_KINDS = {"m2": "the maximum in the exp2 domain (score x log2 e), the drill's m_s",
                "m": "the maximum in natural-log units",
                "lse2": "the log-sum-exp in the exp2 domain", "lse": "the natural log-sum-exp", "l": "l_s"}
VECTOR_KINDS = {"o": "the unnormalised o_s", "o/l": "the normalised o_s / l_s"}


def reference_states(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                     owner_blocks: torch.Tensor, block_n: int, slots: int) -> SliceStates:
    """``owner_blocks``: (bh, n_blocks), the slot (from 0) that read each block, -1: none."""
    n = k.shape[2]
    owner = owner_blocks.to(k.device).long().repeat_interleave(block_n, dim=1)[:, :n]
    if owner.shape[1] < n:
        owner = torch.nn.functional.pad(owner, (0, n - owner.shape[1]), value=-1)
    return states_by_position(q, k, v, lengths, owner, slots)


def states_by_position(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                       owner: torch.Tensor, slots: int) -> SliceStates:
    """``owner``: (bh, max_len), the slot (from 0) that holds each position, -1: none."""
    b, h, n, d = k.shape
    dev = k.device
    s = torch.einsum("bhd,bhnd->bhn", q.double(), k.double()).reshape(b * h, n) / d**0.5
    vv = v.double().reshape(b * h, n, d)
    owner = owner.to(dev).long()
    held = torch.arange(n, device=dev)[None, :] < lengths.to(dev).long().repeat_interleave(h)[:, None]
    owner = torch.where(held, owner, torch.full_like(owner, -1))
    mask = owner[:, None, :] == torch.arange(slots, device=dev)[None, :, None]  # (bh, slots, n)
    ms = torch.where(mask, s[:, None, :], torch.full_like(s[:, None, :], float("-inf")))
    m = ms.amax(-1)
    p = torch.where(mask, torch.exp(ms - torch.where(torch.isfinite(m), m, torch.zeros_like(m))[..., None]),
                    torch.zeros_like(ms))
    pos = torch.arange(n, device=dev)[None, None, :].expand_as(mask)
    first = torch.where(mask, pos, torch.full_like(pos, n)).amin(-1)
    last = torch.where(mask, pos, torch.full_like(pos, -1)).amax(-1)
    count = mask.sum(-1)
    return SliceStates(m, p.sum(-1), torch.einsum("bsn,bnd->bsd", p, vv), count,
                       torch.where(count > 0, first, torch.full_like(first, -1)), last)


def _close(measured: torch.Tensor, ref: torch.Tensor, kind: str, scale: torch.Tensor) -> torch.Tensor:
    """Elementwise (per slot) agreement of a stored field with the reference's."""
    if kind in ("o", "o/l"):
        err = (measured - ref).abs().amax(-1)
        return err <= 2e-3 * scale + 1e-4
    if kind == "l":
        return (measured - ref).abs() <= 1e-3 * ref.abs() + 1e-4
    return (measured - ref).abs() <= 2e-3 + 1e-5 * ref.abs()


@dataclass
class Convention:
    scalars: dict[FieldKey, str]  # scalar field -> kind ("" where no kind fits)
    vector: str  # "" where none fits
    # every kind that fits (a case of one dominant key per slice, l_s = 1, cannot tell m from lse)
    scalar_fits: dict[FieldKey, set[str]] = field(default_factory=dict, compare=False)
    vector_fits: set[str] = field(default_factory=set, compare=False)

    @property
    def known(self) -> bool:
        return self.vector != "" and any(k in ("m2", "m", "lse2", "lse") for k in self.scalars.values())


def stored(roles: Roles, copies: str = "after") -> tuple[dict[FieldKey, torch.Tensor], torch.Tensor]:
    """The states the split launch wrote, as (rows, slots) and (rows, slots, head_dim) float64,
    read in each tensor's layout (``copies="before"``: what the state tensors held before it)."""
    held = getattr(roles.split, copies)
    scal = {}
    for pos in roles.tensors:
        canon = roles.layout(pos).canonical(held[roles.split_pos[pos]].double(), roles.sizes(pos))
        for f in range(roles.fields[pos]):
            scal[(pos, f)] = canon[f]
    vec = roles.layout(roles.vector).canonical(held[roles.split_pos[roles.vector]].double(), roles.sizes(roles.vector))
    return scal, vec


def slots_left_alone(roles: Roles) -> torch.Tensor | None:
    """(rows, slots) bool, on the CPU: the slots whose every state value the split launch left as
    the launcher passed it (NaN where NaN was); None where the copies from before it are missing."""
    split = roles.split
    positions = [roles.split_pos[p] for p in [*roles.tensors, roles.vector]]
    if not all(p in split.before and p in split.after for p in positions):
        return None
    after_s, after_v = stored(roles)
    before_s, before_v = stored(roles, "before")

    def same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a == b) | (a.isnan() & b.isnan())

    alone = same(after_v, before_v).all(-1)
    for key, t in after_s.items():
        alone &= same(t, before_s[key])
    return alone.cpu()


def convention(roles: Roles, ref: SliceStates) -> tuple[Convention, dict[FieldKey, torch.Tensor], torch.Tensor]:
    """The kind of each stored field that agrees with the reference on the most non-empty slots."""
    scal, vec = stored(roles)
    nonempty = ref.sums > 0
    scale = torch.maximum(ref.o.abs().amax(-1), ref.sums)

    def score(measured: torch.Tensor, kind: str) -> int:
        r = ref.kind(kind).to(measured.device)
        sc = scale if kind == "o" else torch.ones_like(scale)
        return int((_close(measured, r, kind, sc.to(measured.device)) & nonempty.to(measured.device)).sum())

    total = int(nonempty.sum())
    kinds: dict[FieldKey, str] = {}
    fits: dict[FieldKey, set[str]] = {}
    for i, t in scal.items():
        scores = {kk: score(t, kk) for kk in SCALAR_KINDS}
        best = max(scores, key=lambda kk: scores[kk])
        kinds[i] = best if scores[best] > total // 2 else ""
        fits[i] = {kk for kk, n in scores.items() if n > total // 2}
    vscores = {kk: score(vec, kk) for kk in VECTOR_KINDS}
    vbest = max(vscores, key=lambda kk: vscores[kk])
    return (Convention(kinds, vbest if vscores[vbest] > total // 2 else "", fits,
                       {kk for kk, n in vscores.items() if n > total // 2}), scal, vec)


def agreed(conventions: list[Convention]) -> Convention | None:
    """The one convention every case fits (kinds in the order of SCALAR_KINDS/VECTOR_KINDS), or None."""
    if not conventions:
        return None
    scalars: dict[FieldKey, str] = {}
    for i in conventions[0].scalar_fits:
        common = set.intersection(*(c.scalar_fits.get(i, set()) for c in conventions))
        scalars[i] = next((kk for kk in SCALAR_KINDS if kk in common), "")
    vcommon = set.intersection(*(c.vector_fits for c in conventions))
    conv = Convention(scalars, next((kk for kk in VECTOR_KINDS if kk in vcommon), ""))
    return conv if conv.known else None


# -- the split kernel against the reference, slice by slice -------------------------------------
def split_report(roles: Roles, ref: SliceStates, lengths: list[int], heads: int,
                 block_n: int) -> tuple[bool | None, str, Convention, bool]:
    """(split right?, words, convention, wrong on a non-empty slice?).  None: nothing could be
    compared.  (A split whose only fault is NaN in its empty slices is not right, and not wrong
    on a non-empty slice.)"""
    conv, scal, vec = convention(roles, ref)
    # the partition is the visit map's: where a slot the map calls empty stored an output, the
    # map does not say which slot read what (the visit store writes something else): no judgement
    if bool(((vec.abs().amax(-1) > 0).cpu() & ~(ref.sums > 0).cpu()).any()):
        return None, "", conv, False
    finite = all(bool(torch.isfinite(t).all()) for t in [*scal.values(), vec])
    if finite and not conv.vector and not any(conv.scalars.values()):
        # nothing fits: a wrong split, or states in a convention or layout (slice-major, say) the
        # tutor does not know; which, the measurements cannot say
        return None, (" None of the fields your split kernel stores matches the reference's slice states (a"
                      " maximum or log-sum-exp, base 2 or e, l_s, o_s normalised or not) in the layout"
                      " [sequence*head, slice]: either the split kernel is wrong or it stores another"
                      " convention or layout."), conv, False
    nonempty = (ref.sums > 0).cpu()  # the masks are gathered on the CPU (bh x slots booleans: small)
    bad = torch.zeros_like(nonempty)
    fields: dict[str, str] = {}
    has_lse = any(k in ("lse", "lse2") for k in conv.scalars.values())
    has_m = any(k in ("m", "m2") for k in conv.scalars.values())
    for i, t in scal.items():
        if not conv.scalars[i] and has_lse and conv.vector == "o/l":
            continue  # an extra field beside an lse and a normalised o (an unused l): not compared
        kind = conv.scalars[i] or ("l" if has_m else "m2" if i == min(scal) else "l")
        r = ref.kind(kind).to(t.device)
        wrong = (~_close(t, r, kind, torch.ones_like(r))).cpu() & nonempty
        if bool(wrong.any()):
            bad |= wrong.cpu()
            fields[kind] = _factor_words(t.cpu()[wrong], r.cpu()[wrong], kind)
    vkind = conv.vector or "o"
    r = ref.kind(vkind).to(vec.device)
    scale = torch.maximum(ref.o.abs().amax(-1), ref.sums) if vkind == "o" else torch.ones_like(ref.sums)
    vwrong = (~_close(vec, r, vkind, scale.to(vec.device))).cpu() & nonempty
    if bool(vwrong.any()):
        bad |= vwrong.cpu()
        fields[vkind] = _factor_words(vec.cpu()[vwrong].flatten(), r.cpu()[vwrong].flatten(), vkind)
    # empty slots: what the split stored there
    empty_nan = []
    for i, t in scal.items():
        if conv.scalars[i] or len(scal) == 1:
            empty_nan.append(torch.isnan(t).cpu() & ~nonempty)
    empty_nan.append(torch.isnan(vec).any(-1).cpu() & ~nonempty)
    nan_empty = torch.stack(empty_nan).any(0)
    words = []
    names = ", ".join(f"{SCALAR_KINDS[k]}" for k in conv.scalars.values() if k)
    if conv.known and not bool(bad.any()):
        words.append(f" Your split kernel alone is right: on every non-empty slice its states equal the reference's"
                     f" ({names}; {VECTOR_KINDS[conv.vector]}).")
    elif bool(bad.any()):
        words.append(" Your split kernel's slice states differ from the reference's on "
                     f"{int(bad.sum())} of {int(nonempty.sum())} non-empty slices: "
                     + _where(bad, ref, lengths, heads, block_n) + "; "
                     + "; ".join(f"{VECTOR_KINDS.get(k) or SCALAR_KINDS.get(k, k)} {w}" for k, w in fields.items())
                     + ".")
        fit = [SCALAR_KINDS[k] for k in conv.scalars.values() if k]
        fit += [VECTOR_KINDS[conv.vector]] if conv.vector else []
        if fit and (conv.vector not in ("", "o") or any(k not in ("", "m2", "l") for k in conv.scalars.values())):
            words.append(" The fields that fit a convention on most slices hold: " + "; ".join(fit) + ".")
    if bool(nan_empty.any()):
        seqs = sorted({int(r) // heads for r in nan_empty.any(1).nonzero().flatten().tolist()})
        which = f"sequence{'s' if len(seqs) > 1 else ''} {', '.join(map(str, seqs))}"
        alone = slots_left_alone(roles)
        if alone is not None and bool(alone[nan_empty].all()):
            # (blind round 22, 05/m34) no store reached them: the NaN is what the buffer held
            words.append(f" Your split kernel stores nothing for the empty slices (those that hold no position) of"
                         f" {which}: their states came out value for value as the launcher's buffer held them"
                         " before the launch (NaN there: torch.empty leaves whatever the memory held, so it"
                         " changes from run to run), and the merge reads them. Store an empty slice's state"
                         " (m = -inf, l = 0, o = 0), or have the merge skip slices past the length.")
        else:
            words.append(f" Your split kernel stores NaN for the empty slices (those that hold no position) of"
                         f" {which}.")
    right = None if not conv.known and not bool(bad.any()) else not bool(bad.any()) and not bool(nan_empty.any())
    return right, "".join(words), conv, bool(bad.any())


def unstored_slots_words(roles: Roles, case: str, wrong_rows: torch.Tensor) -> tuple[str, bool]:
    """Where the split launch stored nothing to some state slots (:func:`slots_left_alone`) of a
    (sequence*head) row whose output is wrong (``wrong_rows``, bool per row: NaN, Inf or out of
    tolerance), the words, and whether they explain it: every wrong row has such a slot and some
    row has none (else the pattern tells nothing); ("", False) otherwise."""
    alone = slots_left_alone(roles)
    if alone is None or not bool(alone[wrong_rows].any()):
        return "", False
    explains = bool(alone[wrong_rows].any(-1).all()) and not bool(alone.any(-1).all())
    scal, vec = stored(roles)
    odd = ~torch.isfinite(vec).all(-1)
    zero = (vec == 0).all(-1)
    for t in scal.values():
        odd |= ~torch.isfinite(t)
        zero &= t == 0
    nonfinite = int((alone & odd.cpu()).sum())
    held = ("0 in every state: the buffer was zeroed" if bool(zero.cpu()[alone].all()) else
            "whatever the buffer's memory held: torch.empty leaves it as it was, different from run to run"
            + (f"; {nonfinite} of them NaN or Inf" if nonfinite else ""))
    row, slot = (int(i) for i in alone.nonzero()[0])
    words = (f" On the {case} case's own launch your split kernel stored nothing to {int(alone.sum())} of its"
             f" {alone.numel()} (sequence*head, slice) state slots (row {row}'s slice {slot} the first): they came"
             f" out value for value as the launcher's buffer held them before the launch ({held}), and the merge"
             " reads them.")
    if explains:
        words += (f" Every (sequence, head) whose output is wrong ({int(wrong_rows.sum())}: NaN, Inf or off) has"
                  " such a slot, and the rows without one are right.")
    return words + (" Every slice the merge reads needs its state stored, an empty one too (m = -inf, l = 0,"
                    " o = 0)."), explains


def _factor_words(measured: torch.Tensor, ref: torch.Tensor, kind: str) -> str:
    m, r = measured.double().cpu(), ref.double().cpu()
    if not bool(torch.isfinite(m).all()):
        return f"is NaN or inf on {int((~torch.isfinite(m)).sum())} value(s)"
    ok = r.abs() > 1e-6
    if bool(ok.any()):
        ratio = m[ok] / r[ok]
        lo, hi = float(ratio.min()), float(ratio.max())
        if hi - lo <= 1e-3 * max(abs(hi), 1e-9):
            named = " (ln 2: the log2(e) factor is missing)" if abs(lo - LN2) < 2e-3 else (
                " (log2 e: a natural-log value multiplied by log2 e twice, or exp2 read as exp)"
                if abs(lo - LOG2E) < 3e-3 else "")
            return f"is the reference's times {lo:.4g} on every wrong slice{named}"
        if kind in ("m2", "m", "lse2", "lse"):  # a logarithm: its difference is the factor its exponent makes
            d = m - r
            return f"is off by {float(d.min()):+.3g} to {float(d.max()):+.3g}"
        return f"is off by a factor from {lo:.3g} to {hi:.3g} (largest difference {float((m - r).abs().max()):.3g})"
    return f"is off by up to {float((m - r).abs().max()):.3g}"


def _where(bad: torch.Tensor, ref: SliceStates, lengths: list[int], heads: int, block_n: int) -> str:
    """Which slices of which sequences, and what they have in common."""
    rows, slots = bad.nonzero(as_tuple=True)
    seq_slots: dict[int, set[int]] = {}
    for r, s in zip(rows.tolist(), slots.tolist(), strict=True):
        seq_slots.setdefault(r // heads, set()).add(s)
    first, last = ref.first.cpu(), ref.last.cpu()
    parts = []
    for b, ss in sorted(seq_slots.items()):
        row = b * heads
        spans = ", ".join(f"{s} (positions {int(first[row, s])}-{int(last[row, s])})" for s in sorted(ss))
        parts.append(f"sequence {b} (length {lengths[b]}) slice{'s' if len(ss) > 1 else ''} {spans}")
    text = "; ".join(parts[:6]) + ("; ..." if len(parts) > 6 else "")
    common = []
    nonempty = ref.sums.cpu() > 0
    holds_end = torch.zeros_like(bad)
    for r in range(bad.shape[0]):
        holds_end[r] = last[r] == lengths[r // heads] - 1
    ragged = holds_end & torch.tensor([[lengths[r // heads] % block_n != 0] * bad.shape[1]
                                       for r in range(bad.shape[0])])
    single = ref.positions.cpu() == 1
    first_slot = torch.zeros_like(bad)
    first_slot[:, 0] = True
    for what, mask in (("each holds its sequence's last position", holds_end),
                       ("each ends a sequence inside a block (a ragged end)", ragged),
                       ("each is a sequence's first slice", first_slot),
                       ("each holds one position", single),
                       (f"each spans more than one block of {block_n} positions", ref.positions.cpu() > block_n)):
        if bool((mask[bad]).all()):  # every wrong slice has it; "only they" when no right one does
            common.append(what + ("" if bool((mask & nonempty & ~bad).any()) else ", and no right slice does"))
    if not common and bool((~bad & nonempty).any()):
        right = int((~bad & nonempty).sum())
        common.append(f"the other {right} non-empty slices are right")
    return text + (" (" + "; ".join(common) + ")" if common else "")


# -- the merge kernel alone on the tutor's states ------------------------------------------------
def _patterns(slots: int) -> list[tuple[str, list[float], list[float]]]:
    """(what the row tests, m_s in the exp2 domain (-inf: empty), l_s) per row pattern."""
    inf = float("-inf")
    ls = [1.5, 24.0, 3.0, 60.0, 7.0, 2.0, 40.0, 11.0]
    ms = [0.0, 3.0, -2.0, 1.5, -4.0, 2.5, -1.0, 0.5]
    ls2 = [40.0, 1.2, 12.0, 6.0, 30.0, 2.5, 9.0, 17.0]

    def cyc(xs: list[float]) -> list[float]:
        return [xs[i % len(xs)] for i in range(slots)]

    rows = [("one maximum, different sums", [0.0] * slots, cyc(ls)),
            ("different maxima and sums (the largest maximum in a slice of few keys)", cyc(ms), cyc(ls2))]
    if slots >= 2:
        half = max(1, slots // 2)
        rows.append(("empty slices after the first ones", cyc(ms)[:half] + [inf] * (slots - half),
                     cyc(ls2)[:half] + [0.0] * (slots - half)))
        rows.append(("the maximum in the last slice, drops of 200 between slices",
                     [-200.0 * (slots - 1 - s) for s in range(slots)], cyc(ls2)))
        rows.append(("maxima near 300 (2^300 overflows fp32)", [300.0 + x for x in cyc(ms)], cyc(ls)))
    return rows


@dataclass
class MergeReadout:
    exact: bool
    code: str | None  # a named merge mistake, or None
    nan_rows: list[str]  # the row patterns whose output is not finite
    words: str


def _encode(conv: Convention, m2: torch.Tensor, sums: torch.Tensor, slots: int, head_dim: int,
            empty: dict[str, float] | None) -> tuple[dict[FieldKey, torch.Tensor], torch.Tensor]:
    nonempty = sums > 0
    safe_l = torch.where(nonempty, sums, torch.ones_like(sums))
    lse2 = torch.where(nonempty, m2 + torch.log2(safe_l), m2)
    values = {"m2": m2, "m": m2 * LN2, "lse2": lse2, "lse": lse2 * LN2, "l": sums}
    scal = {}
    for i, kind in conv.scalars.items():
        x = values.get(kind or "l", sums).clone()
        if empty is not None and kind in empty:
            x = torch.where(nonempty, x, torch.full_like(x, empty[kind]))
        scal[i] = x
    eye = torch.zeros(m2.shape[0], slots, head_dim, dtype=torch.float64)
    idx = torch.arange(slots)
    eye[:, idx, idx] = 1.0
    vec = eye * (sums[..., None] if conv.vector == "o" else nonempty[..., None].double())
    return scal, vec


def _aligned_copy(like: torch.Tensor) -> torch.Tensor:
    """A fresh tensor like ``like`` whose data sits at the same offset modulo 16 bytes
    (Triton specialises pointers on 16-byte alignment: the same compiled variant)."""
    per = max(1, 16 // like.element_size())
    buf = torch.empty(like.numel() + per, dtype=like.dtype, device=like.device)
    off = like.storage_offset() % per
    return buf[off: off + like.numel()].view(like.shape)


def _filled(like: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """A copy of ``like`` (same shape, dtype and 16-byte alignment) holding ``flat``."""
    t = _aligned_copy(like)
    t.copy_(flat.reshape(t.shape).to(device=t.device, dtype=t.dtype))
    return t


def merge_probe(module: ModuleType, roles: Roles, conv: Convention, out: torch.Tensor, bh: int, head_dim: int,
                empty: dict[str, float] | None, keep_empty: torch.Tensor | None = None) -> MergeReadout | None:
    """The merge alone on the tutor's states; ``keep_empty`` (rows, slots): slots to leave empty
    in every pattern (the real case's empty ones, for a merge that reads the lengths itself)."""
    slots = roles.slots
    if not conv.known or head_dim < slots or slots < 2:
        return None
    patterns = _patterns(slots)
    if bh < len(patterns):  # every row pattern is needed to tell the merges apart
        return None
    which = [i % len(patterns) for i in range(bh)]
    m2 = torch.tensor([patterns[w][1] for w in which], dtype=torch.float64)
    sums = torch.tensor([patterns[w][2] for w in which], dtype=torch.float64)
    if keep_empty is not None:  # the merge reads the lengths: a slot empty in the real case stays empty
        keep = keep_empty.cpu()[:bh]
        m2 = torch.where(keep, torch.full_like(m2, float("-inf")), m2)
        sums = torch.where(keep, torch.zeros_like(sums), sums)
        lost = ~(sums > 0).any(-1)  # a row left with no slot: its real slots, one maximum, one position each
        m2[lost] = torch.where(keep[lost], m2[lost], torch.zeros_like(m2[lost]))
        sums[lost] = torch.where(keep[lost], sums[lost], torch.ones_like(sums[lost]))
    scal, vec = _encode(conv, m2, sums, slots, head_dim, empty)
    kernel = getattr(module, roles.merge.name)  # the real kernel: the recording proxies are gone by now
    got = _merge_alone(kernel, roles, scal, vec, out)[:bh, :head_dim]
    found = read_weights(got, m2, sums, [patterns[w][0] for w in which], slots)
    if not found.exact:
        reads = _vector_reads(kernel, roles, conv, out, bh, head_dim, empty)
        if reads:  # the one-hot read-out measured where the merge reads o_s, not how it weighs them
            return MergeReadout(False, None, found.nan_rows, reads)
    return found


def _merge_alone(kernel: Any, roles: Roles, scal: dict[FieldKey, torch.Tensor], vec: torch.Tensor,
                 out: torch.Tensor) -> torch.Tensor:
    """The recorded merge launch on the tutor's states (each tensor in the split's layout), its
    output NaN first; the output, float64 on the CPU, one row per (sequence, head)."""
    args = list(roles.merge.args)
    for pos in roles.tensors:
        layout, sizes = roles.layout(pos), roles.sizes(pos)
        canon = layout.canonical(args[pos].detach().clone().double(), sizes).clone()
        for f in range(roles.fields[pos]):
            canon[f] = scal[(pos, f)]
        args[pos] = _filled(args[pos], layout.flatten(canon))
    args[roles.vector] = _filled(args[roles.vector], roles.layout(roles.vector).flatten(vec))
    out_pos = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and _ptr(a) == _ptr(out))
    probe_out = _aligned_copy(args[out_pos])
    probe_out.fill_(float("nan"))
    args[out_pos] = probe_out
    kernel[roles.merge.grid](*args, **roles.merge.kwargs)
    if probe_out.is_cuda:
        torch.cuda.synchronize()
    return probe_out.reshape(roles.rows, -1).double().cpu()


EXACT_INTEGERS = {torch.float16: 2048, torch.bfloat16: 256, torch.float32: 1 << 24}  # every whole number up to


def _vector_reads(kernel: Any, roles: Roles, conv: Convention, out: torch.Tensor, bh: int, head_dim: int,
                  empty: dict[str, float] | None) -> str:
    """Where the merge reads each slice's o_s, where that is not where the split's layout keeps it:
    the merge again on states where one slice of each row holds all the mass (maximum 0, the
    others 200 and more below, every l_s 1), each vector state element naming itself (its index
    in the tensor's (row, slot, component) order, plus 1; within the row only, where the output's
    dtype cannot hold every index exactly).  A merge that weighs that slice 1 outputs the values
    it read for it: whole numbers that name the element read for each component, checked by a
    second launch with the names shuffled.  "" where every row reads its own slice's components,
    or the outputs name no one element each (a merge that weighs wrong mixes them)."""
    slots = roles.slots
    per_row = slots * head_dim
    absolute = bh * per_row <= EXACT_INTEGERS.get(out.dtype, 0)
    if not absolute and per_row > EXACT_INTEGERS.get(out.dtype, 0):
        return ""
    top = torch.arange(bh) % slots  # the slice holding the mass, row by row
    m2 = -200.0 * (torch.arange(slots)[None, :] != top[:, None]).double() * (1 + torch.arange(slots)[None, :])
    sums = torch.ones(bh, slots, dtype=torch.float64)
    scal, _ = _encode(conv, m2, sums, slots, head_dim, empty)
    names = torch.arange(bh * per_row, dtype=torch.float64).reshape(bh, slots, head_dim)
    vec = (names if absolute else names % per_row) + 1
    got = _merge_alone(kernel, roles, scal, vec, out)[:bh, :head_dim]
    # the same launch with the names shuffled: an output that is one element read holds that
    # element's other name too; a mixture of elements that happened to land on a whole number
    # does not (a merge that averages the slots, say)
    count = int(vec.max())
    shuffle = torch.randperm(count, generator=torch.Generator().manual_seed(0)).double() + 1
    again = _merge_alone(kernel, roles, scal, shuffle[(vec - 1).long()], out)[:bh, :head_dim]
    rows = torch.arange(bh)
    finite = torch.isfinite(got).all(-1) & torch.isfinite(again).all(-1)
    if not bool(finite.any()):
        return ""
    got, again, top, rows = got[finite], again[finite], top[finite], rows[finite]
    comp = torch.arange(head_dim)[None, :]
    own = (rows[:, None] * per_row if absolute else 0) + top[:, None] * head_dim + comp
    index = got.round()
    if bool((index - 1 == own).all()) or not bool(((got - index).abs() <= 0.01).all()) \
            or float(index.min()) < 1 or float(index.max()) > count:
        return ""
    index = (index - 1).long()
    if not bool(((again - shuffle[index]).abs() <= 0.01).all()):
        return ""  # no one element per component: the merge mixes what it reads
    base = (rows[:, None] * per_row if absolute else 0)
    whole_slot = ((index - base) % head_dim == comp) & ((index - base) // per_row == 0)
    if bool(whole_slot.all()):
        return ""  # each row's output is one of its own slots, whole: which slice it weighs, not where it reads
    r = int((~whole_slot).any(-1).double().argmax())  # the first row whose output is no slot of its own, whole

    def element(i: int) -> str:
        row, rest = divmod(i, per_row)
        where = f"row {row}'s " if absolute else "a row's "
        return f"{where}slot {rest // head_dim} component {rest % head_dim}"

    first = [f"as component {c}, {element(int(i))}" for c, i in enumerate(index[r, :3].tolist())]
    words = (f" The tutor ran your merge kernel again on states where one slice of each row holds all the mass"
             f" (maximum 0, the others 200 and more below, every l_s 1) and each element of the o states names"
             f" itself ({'its index in (row, slot, component) order' if absolute else 'its index within its row'},"
             f" plus 1; a second launch with the names shuffled agreed): each output component is one element of"
             f" the o states, and not the heavy slice's own. In row {int(rows[r])}, where slice {int(top[r])} holds"
             f" the mass, the output is, {'; '.join(first)}.")
    if absolute and roles.layout(roles.vector).order == "rsd":
        unscaled = {
            f"row * {per_row} + slice + c: the slice's offset within the row is not multiplied by head_dim":
                rows[:, None] * per_row + top[:, None] + comp,
            f"(row * {slots} + slice) + c: the state's index (row * slots + slice) is not multiplied by head_dim":
                rows[:, None] * slots + top[:, None] + comp,
        }
        said = next((why for why, at in unscaled.items() if bool((index == at).all())), None)
        if said:
            words += (f" In every row it read exactly element {said}, where the split keeps component c at"
                      f" (row * {slots} + slice) * {head_dim} + c (so its weights, read out through one-hot states,"
                      " looked wrong too).")
    return words


def true_shares(m2: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    big = m2.amax(-1, keepdim=True)
    w = sums * torch.exp2(m2 - big)
    return w / w.sum(-1, keepdim=True)


def read_weights(got: torch.Tensor, m2: torch.Tensor, sums: torch.Tensor, labels: list[str],
                 slots: int) -> MergeReadout:
    weights = got[:, :slots]
    finite = torch.isfinite(got).all(-1)
    nonempty = sums > 0
    truth = true_shares(m2, sums)
    big = m2.amax(-1, keepdim=True)
    base = torch.where(nonempty, torch.exp2(m2 - big), torch.zeros_like(m2))
    hyp = {
        "merge-leaves-out-l": base / base.sum(-1, keepdim=True),
        "partials-averaged": nonempty.double() / nonempty.double().sum(-1, keepdim=True),
        "no-max-rescale": sums / sums.sum(-1, keepdim=True),
        "no-final-division": sums * base,
    }
    tol = 5e-3
    rest = got[:, slots:].abs().amax(-1) if got.shape[1] > slots else torch.zeros(got.shape[0])
    right = finite & ((weights - truth).abs().amax(-1) <= tol) & (rest <= tol)
    nan_rows = sorted({labels[i] for i in range(len(labels)) if not bool(finite[i])})
    if bool(right.all()):
        return MergeReadout(True, None, [], " Your merge kernel alone is exact: on the tutor's slice states (one"
                                             " maximum and different sums, the maximum in a slice of few keys,"
                                             " empty slices, drops of 200, maxima near 300) it gives every slice"
                                             " its share of the mass.")
    def fits_all(h: torch.Tensor) -> bool:
        fits = (weights - h).abs() <= tol * torch.maximum(torch.ones_like(h), h.abs())
        return bool((fits.all(-1) | ~finite).all()) and bool(finite.any()) and bool((~right & finite).any())

    code = next((name for name, h in hyp.items() if fits_all(h)), None)
    # weights of no named mistake that still have a formula: said in words, as measured
    natural = torch.where(nonempty, torch.exp((m2 - big).clamp_min(-700)), torch.zeros_like(m2)) * sums
    top = (m2 == big).double()
    but_last = sums * base
    but_last[:, -1] = 0.0
    # a log of l_s in the other base than the maxima's, added to them: 2^(m + ln l) = 2^m l^ln2, e^(m + log2 l)
    safe_l = torch.where(nonempty, sums, torch.ones_like(sums))
    ln_l = base * safe_l.pow(LN2) * nonempty.double()
    log2_l = base * safe_l.pow(LOG2E) * nonempty.double()
    # a merge that walks the slices in order, one running maximum M_s over slices 0..s (blind round 24,
    # 05/b20): what it adds of slice s carries 2^(m_s - M_s), rescaled by alpha to the final M or not
    running = torch.where(nonempty, m2, torch.full_like(m2, float("-inf"))).cummax(-1).values
    at_its_time = torch.where(nonempty, torch.exp2(m2 - running.clamp_min(-1e300)), torch.zeros_like(m2)) * sums
    total = (sums * base).sum(-1, keepdim=True)
    sum_at_its_time = at_its_time.sum(-1, keepdim=True)
    described = {
        "l_s e^(m_s - M) / sum_t l_t e^(m_t - M): natural exp applied to maxima kept in the exp2 domain (or the"
        " other way round)": natural / natural.sum(-1, keepdim=True),
        "l_s^0.693 2^(m_s - M) / sum_t l_t^0.693 2^(m_t - M): a natural log of l_s added to a maximum in the exp2"
        " domain, where log2(l_s) belongs (2^(ln l) = l^0.693)": ln_l / ln_l.sum(-1, keepdim=True),
        "l_s^1.44 2^(m_s - M) / sum_t l_t^1.44 2^(m_t - M): log2(l_s) added to a maximum in natural-log units,"
        " where ln(l_s) belongs (e^(log2 l) = l^1.44)": log2_l / log2_l.sum(-1, keepdim=True),
        "l_s 2^(m_s - M) / sum_t 2^(m_t - M): the sum it divides by leaves out l_t": sums * base / base.sum(
            -1, keepdim=True),
        "l_s 2^(m_s - M) / sum_t l_t: the sum it divides by is not brought to one maximum": sums * base / sums.sum(
            -1, keepdim=True),
        "l_s / sum_t l_t 2^(m_t - M): the o_s are added without their factor 2^(m_s - M), while the sum it divides"
        " by has it": sums / (sums * base).sum(-1, keepdim=True),
        "l_s 2^(m_s - M_s) / sum_t l_t 2^(m_t - M), with M_s the running maximum of slices 0..s: a merge that"
        " walks the slices in order rescales its sum l by alpha = 2^(M_old - M_new) when the maximum grows, but"
        " not its accumulated output": at_its_time / total,
        "l_s 2^(m_s - M) / sum_t l_t 2^(m_t - M_t), with M_t the running maximum of slices 0..t: a merge that"
        " walks the slices in order rescales its accumulated output by alpha = 2^(M_old - M_new) when the maximum"
        " grows, but not its sum l": sums * base / sum_at_its_time,
        "1 for the slice holding the largest maximum, 0 for the others": top / top.sum(-1, keepdim=True),
        f"its share of the mass among slices 0..{slots - 2}, and 0 for slice {slots - 1}: the merge leaves out the"
        f" last slice (its mask or loop over the slices one short)": but_last / but_last.sum(-1, keepdim=True),
    }
    formula = None if code else next((words for words, h in described.items() if fits_all(h)), None)
    if code is None and formula is None:
        formula = _power_law_words(weights, m2, sums, finite, fits_all)
    # the worst slice of the worst finite row
    words = ""
    if formula:
        words += f" On every row the tutor tried, your merge's weight for slice s is {formula}."
    diff = (weights - truth).abs().masked_fill(~finite[:, None], 0.0)
    if bool(finite.any()) and float(diff.max()) > tol:
        r, s = divmod(int(diff.argmax()), slots)
        words += (f" The tutor ran your merge kernel alone on slice states it chose (each slice's normalised"
                  f" answer a one-hot vector, so the output reads out the weight of each slice): with"
                  f" m_s = [{', '.join(_num(x) for x in m2[r].tolist())}] (exp2 domain) and"
                  f" l_s = [{', '.join(_num(x) for x in sums[r].tolist())}], your merge weights slice {s} by"
                  f" {float(weights[r, s]):.3g} where its share of the mass, l_s 2^(m_s - M) / sum_t l_t 2^(m_t - M),"
                  f" is {float(truth[r, s]):.3g} (the slices' weights"
                  f" [{', '.join(f'{x:.3g}' for x in weights[r].tolist())}], their shares"
                  f" [{', '.join(f'{x:.3g}' for x in truth[r].tolist())}]).")
        good = sorted({labels[i] for i in range(len(labels)) if bool(right[i])})
        wrong = sorted({labels[i] for i in range(len(labels)) if not bool(right[i]) and bool(finite[i])})
        words += f" Wrong on the rows with {'; '.join(wrong)}"
        words += f"; right on {'; '.join(good)}." if good else "."
    if nan_rows:
        words += (f" Your merge alone gives NaN or inf on the rows with {'; '.join(nan_rows)}"
                  + ("; right on the others." if bool((right | ~finite).all()) else "."))
    return MergeReadout(False, code, nan_rows, words)


def _power_law_words(weights: torch.Tensor, m2: torch.Tensor, sums: torch.Tensor, finite: torch.Tensor,
                     fits_all: Callable[[torch.Tensor], bool]) -> str | None:
    """Where the merge weighs every slice as l_s^b 2^(a (m_s - M)), normalised over the slices,
    one (a, b) for every row the tutor tried (fitted on the log weights, a constant a row): that
    formula in words (blind round 19, 05/w08: l counted twice, b = 2); None where none fits."""
    nonempty = (sums > 0) & finite[:, None]
    usable = nonempty & (weights > 1e-12)  # fitted where a log is measurable; every row is checked after
    if int(usable.sum()) < 4:
        return None
    ln_w = torch.where(usable, weights.clamp_min(1e-300).log(), torch.zeros_like(weights))
    x1 = torch.where(usable, m2 * LN2, torch.zeros_like(m2))
    x2 = torch.where(usable, sums.clamp_min(1e-300).log(), torch.zeros_like(sums))
    n = usable.sum(-1, keepdim=True).clamp(min=1)

    def centred(x: torch.Tensor) -> torch.Tensor:
        return torch.where(usable, x - x.sum(-1, keepdim=True) / n, torch.zeros_like(x))

    y, a1, a2 = centred(ln_w), centred(x1), centred(x2)
    gram = torch.tensor([[float((a1 * a1).sum()), float((a1 * a2).sum())],
                         [float((a1 * a2).sum()), float((a2 * a2).sum())]], dtype=torch.float64)
    if float(torch.linalg.det(gram)) < 1e-6:
        return None
    a, b = torch.linalg.solve(gram, torch.tensor([float((a1 * y).sum()), float((a2 * y).sum())],
                                                 dtype=torch.float64)).tolist()
    if abs(a - 1) < 0.02 and abs(b - 1) < 0.02:
        return None  # the right weights: what is wrong is elsewhere
    big = m2.amax(-1, keepdim=True)
    fitted = torch.where(nonempty, torch.exp2(a * (m2 - big)) * sums.clamp_min(1e-300).pow(b), torch.zeros_like(m2))
    if not fits_all(fitted / fitted.sum(-1, keepdim=True)):
        return None
    a_off, b_off = abs(a - 1) >= 0.02, abs(b - 1) >= 0.02
    power = f"^{b:.3g}" if b_off else ""

    def term(x: str) -> str:
        return f"l_{x}{power} 2^({a:.3g} (m_{x} - M))" if a_off else f"l_{x}{power} 2^(m_{x} - M)"

    def near(x: float, *values: float) -> bool:
        return any(abs(x - v) < 0.03 for v in values)

    why = []
    if b_off:
        said = f"l_s enters the weight to the power {b:.3g} where it belongs once"
        if near(b, 2):
            said += " (l counted twice: once in o_s or a weight, and again)"
        elif near(b, LN2, LOG2E):
            said += " (a log of l_s in another base than the maxima's: 2^(ln l) = l^0.693, e^(log2 l) = l^1.44)"
        why.append(said)
    if a_off:
        if near(a, -1):
            why.append("the maxima enter with their sign flipped: 2^(M - m_s) where 2^(m_s - M) belongs")
        elif near(a, LN2, LOG2E):
            why.append(f"the maxima enter multiplied by {a:.3g}: in other units than the exponential's (exp of"
                       " maxima kept for exp2 gives 1.44, the other way round 0.693)")
        else:
            why.append(f"the maxima enter multiplied by {a:.3g}")
    return f"{term('s')} / sum_t {term('t')}, fitted on every row (the right weight is l_s 2^(m_s - M)): " + \
        "; ".join(why)


def _num(x: float) -> str:
    return "-inf" if x == float("-inf") else f"{x + 0.0:g}"


def empty_values(conv: Convention, scal: dict[FieldKey, torch.Tensor], vec: torch.Tensor,
                 ref: SliceStates) -> dict[str, float] | None:
    """What the kernel's own split stores for an empty slice (kind -> value), where it
    stores one finite-or-(-inf) value there; None: use the empty state (-inf, 0, 0)."""
    empty = ~(ref.sums > 0)
    if not bool(empty.any()):
        return None
    found: dict[str, float] = {}
    for i, kind in conv.scalars.items():
        vals = scal[i][empty.to(scal[i].device)].cpu()
        if kind and bool((vals == vals[0]).all()) and not bool(torch.isnan(vals[0])):
            found[kind] = float(vals[0])
    return found or None


def padding_slots_words(case: str, splits: int, again: torch.Tensor | None, expected: torch.Tensor,
                        tolerance: float) -> str:
    """Where a case with NaN ran with a split count that is not a power of two, and ``again`` (the
    same case on the same inputs with the next power of two, every slot of a merge's
    ``tl.arange(0, SPLITS_POW2)`` then a real slice) is finite and right: words saying so, and
    what a padding slot must load; "" otherwise (no relaunch, or it is wrong too)."""
    pow2 = 1 << (splits - 1).bit_length()
    if again is None or not bool(torch.isfinite(again).all()):
        return ""
    if float((again.double().cpu() - expected.double().cpu()).abs().max()) > tolerance:
        return ""
    return (f" The {case} case ran with num_splits={splits}; on the same inputs with num_splits={pow2} (a power"
            f" of two: no padding slot in a merge that rounds the slice count up to one) the output is finite and"
            f" right, so the NaN comes with the split count - at {splits} a merge over tl.arange(0, {pow2}) has"
            f" {pow2 - splits} slot{'s' if pow2 - splits > 1 else ''} past the last slice. A masked load of the"
            " states there must give m = -inf (other=float(\"-inf\")) and l = o = 0, so such a slot weighs"
            " exp2(-inf - M) = 0; a finite m there (0, say) stands above every real maximum of a sequence whose"
            " scores all lie far below 0, as in this case, and its weights underflow to 0.")
