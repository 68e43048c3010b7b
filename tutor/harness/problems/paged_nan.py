"""Where drill 07's NaN starts: in slice states the split kernel never stored, in the
states it stored, or in the merge.

The launcher's two kernels are recorded on every correctness launch
(:func:`split_kv_readout.recording`), each float32 tensor copied right after each
launch, so the slice states the split kernel stored are known; one more launch of
the case with those states filled with a marker no arithmetic makes
(:data:`split_kv_readout.MARKER_BITS`) tells the slots no store of the split
reaches.  :func:`nan_origin_words` says which of the three the measurements show;
it names a cause only as an example ("as when"), never as the finding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from tutor.harness.findings import index_runs
from tutor.harness.problems import split_kv_readout as apart
from tutor.harness.problems.paged_decode import Launch
from tutor.harness.problems.paged_weights import Relaunch, pairs_words


def _names(call: apart.KernelCall, positions: list[int]) -> str:
    return ", ".join(call.arg_name(pos) for pos in positions)


def _row_major(split: apart.KernelCall, roles: apart.Roles, positions: list[int]) -> bool:
    """Are these state tensors shaped (sequence*head, slice, ...), as the drill's launcher makes
    them?  Only then are their rows read as (sequence, head) pairs and their columns as slices."""
    return all(split.after[pos].dim() >= 2 and tuple(split.after[pos].shape[:2]) == (roles.rows, roles.slots)
               for pos in positions)


def _rows(values: torch.Tensor, rows: int, slots: int) -> torch.Tensor:
    """A state tensor as (rows, slots, values per slot): the drill's row-major layout, on the CPU."""
    return values.reshape(rows, slots, -1).cpu()


def nan_origin_words(x: Launch, rerun_of: Callable[[Launch], apart.Rerun] | None, finite_too: bool = True,
                     relaunch: Relaunch | None = None) -> str:
    """Words for where the NaN of the case ``x`` starts, "" where its launches are not a
    split kernel and a merge kernel sharing slice states (:func:`split_kv_readout.find_roles`).
    ``finite_too``: also where every stored state is finite (the NaN is then made in the
    merge, from states that may still be wrong: a large-score case's l of 0 under a finite
    maximum that started at 0 is one; the caller's words already cover that).  ``relaunch``: the
    case again on other queries (:func:`_moved_states_words`)."""
    if rerun_of is None:  # the diagnosis found state tensors never stored: it said so, nothing to add
        return ""
    c = x.case
    roles = apart.find_roles(x.calls, x.guarded.band("K").view, x.out, c.batch * c.heads, c.head_dim)
    if roles is None:
        return ""
    split, merge = roles.split, roles.merge
    states = [roles.split_pos[pos] for pos in [*roles.tensors, roles.vector]]
    if any(pos not in split.after for pos in states):
        return ""
    bad = (~torch.isfinite(x.out.double().cpu())).any(dim=-1)  # (sequence, head)
    bad_rows = set(bad.flatten().nonzero().flatten().tolist())

    never = _never_stored(split, states, x, rerun_of)
    if never:
        return _never_stored_words(split, merge, roles, never, bad_rows, lambda: _moved_states_words(x, relaunch))

    if not _row_major(split, roles, states):
        return ""  # laid out otherwise: no row or slot of them is named
    stored = [(pos, int(split.after[pos].isnan().sum()), int((split.after[pos] == float("inf")).sum()))
              for pos in states]
    spoiled = [(pos, nans, infs) for pos, nans, infs in stored if nans or infs]
    if spoiled:
        said = "; ".join(f"{split.arg_name(pos)}: " + ", ".join(
            f"{n} {what}" for n, what in ((nans, "NaN"), (infs, "+Inf")) if n)
            + f" of {split.after[pos].numel()} values" for pos, nans, infs in spoiled)
        clean = [pos for pos, nans, infs in stored if not nans and not infs and pos != roles.split_pos[roles.vector]]
        words = (f" The NaN starts in your split kernel ({split.name}): the slice states it stored hold it before"
                 f" your merge kernel reads them ({said}).")
        if clean:
            words += f" {_names(split, clean)} hold{'s' if len(clean) == 1 else ''} none." + _spoiled_slot_words(
                split, roles, states, [pos for pos, _, _ in spoiled])
        return words

    if not finite_too:
        return ""
    some_empty, all_empty = _empty_rows(split, roles, states)
    finite = f" Every slice state your split kernel ({split.name}) stored is finite (an empty slice's m = -inf aside)"
    if bad_rows and bad_rows <= all_empty:
        # every slot empty: the drill's merge gives 0/0 = NaN there by design (blind round 13, 07 w21)
        return (finite + ", and every slot of the NaN (sequence, head) pairs holds the empty state (a stored maximum"
                " of -inf): no slice scored any position of them, and a merge of nothing but empty slices is"
                " 0/0. Check which positions each slice covers: where it starts, its size, and the length it stops"
                " at.")
    words = finite + (f": the NaN is made where your merge kernel ({merge.name}) combines them, in its own arithmetic"
                      " or from finite states it cannot weigh (a slot storing l = 0 under a finite maximum, say).")
    if some_empty and some_empty == bad_rows:
        words += (" The NaN (sequence, head) pairs are exactly those with a slot whose stored maximum is -inf"
                  " (a slice that scored no position) beside slots that scored some: the merge must weigh such a"
                  " slice exp2(-inf − M) = 0, and never take -inf − (-inf) or divide by a zero l.")
    return words


def _moved_states_words(x: Launch, relaunch: Relaunch | None) -> str:
    """Where the NaN (sequence, head) pairs' states went, measured: the case again with only
    their queries negated; the other pairs whose output that changes read what those queries
    scored (blind round 24, 07 b27: the group's heads were scored, but their states stored at
    heads 0..G-1).  "" without a relaunch or where it raises."""
    if relaunch is None:
        return ""
    bad = (~torch.isfinite(x.out.double())).any(dim=-1)  # (sequence, head)
    q = x.inputs.q.clone()
    q[bad.to(q.device)] = -q[bad.to(q.device)]
    try:
        again = relaunch(x, dataclasses.replace(x.inputs, q=q)).double()
    except Exception:  # noqa: BLE001 - a read-out launch of someone else's kernel: nothing measured
        return ""
    before = x.out.double()
    moved = (~bad & ((again - before).abs() > 1e-3).any(dim=-1)).nonzero().tolist()
    if not moved:
        return (" Measured: with the queries of the NaN pairs alone negated, no other pair's output changes: what"
                " their programs scored reaches no output.")
    return (" Measured: with the queries of the NaN pairs alone negated, the output of (sequence, head)"
            f" {pairs_words(moved)} changes too: what those queries scored reaches"
            f" {'those rows' if len(moved) > 1 else 'that row'}. Look at"
            " the (sequence, head) index of the split's state stores against the heads it loads Q for.")


def _never_stored_words(split: apart.KernelCall, merge: apart.KernelCall, roles: apart.Roles,
                        never: dict[int, torch.Tensor], bad_rows: set[int],
                        moved: Callable[[], str] = lambda: "") -> str:
    """The slots no store of the split reaches (the marker launch), in words: whole rows that
    are exactly the NaN pairs (and where their states went: ``moved``), or the same slices'
    slots in every row, or how many."""
    names = _names(split, sorted(never))
    slot_never = torch.zeros(roles.rows, roles.slots, dtype=torch.bool)
    for held in never.values():
        slot_never |= _rows(held, roles.rows, roles.slots).any(dim=2)
    values = sum(int(held.sum()) for held in never.values())
    total = sum(split.after[pos].numel() for pos in never)
    told = (f" Launched again with {names} filled with a marker (a NaN pattern no arithmetic makes), {values} of"
            f" their {total} values still held it after your split kernel ({split.name}) ran: no store of it"
            " reaches them")
    if not _row_major(split, roles, list(never)):
        return told + "."
    whole = set(slot_never.all(dim=1).nonzero().flatten().tolist())
    if whole and whole == bad_rows:
        return (told + ". They are every slot of exactly the (sequence, head) pairs whose output is NaN. Those rows"
                f" keep{_kept_words(split, never)}; your merge kernel ({merge.name}) reads them. No program stored"
                " those heads' states: none scored them, or their states went to other rows." + moved())
    per_row = {tuple(row) for row in slot_never.tolist()}
    if len(per_row) == 1 and not whole:
        pattern = next(iter(per_row))
        unstored = [s for s, missed in enumerate(pattern) if missed]
        if unstored:
            return (told + f", in every (sequence, head) row the slot{'s' * (len(unstored) > 1)} of slice"
                    f"{'s' * (len(unstored) > 1)} {index_runs(unstored)} (of {roles.slots}); the other slots are"
                    " stored. Those slices' states go to another slot or nowhere: look at the slice term of the"
                    " state index and at what each slice stores.")
    return told + "."


def _never_stored(split: apart.KernelCall, states: list[int], x: Launch,
                  rerun_of: Callable[[Launch], apart.Rerun]) -> dict[int, torch.Tensor]:
    """State position -> where the marker outlived the split launch (only those with any)."""
    again = next((call for call in rerun_of(x)({split.name: frozenset(states)}) if call.name == split.name), None)
    if again is None:
        return {}
    held = {pos: (again.after[pos].view(torch.int32) == apart.MARKER_BITS).cpu() for pos in states
            if pos in again.after}
    return {pos: mask for pos, mask in held.items() if bool(mask.any())}


def _kept_words(split: apart.KernelCall, never: dict[int, torch.Tensor]) -> str:
    """What the never-stored slots hold on the check's own launch, in words."""
    values = sorted({v for pos in never for v in
                     torch.unique(split.after[pos].cpu()[never[pos]]).tolist()[:3]})
    if values and all(v in (0.0, float("-inf")) for v in values):
        return " what your launcher put there, the empty state (m = -inf, l = 0, o = 0) in every slot"
    return " whatever your launcher's buffers held there"


def _empty_rows(split: apart.KernelCall, roles: apart.Roles, states: list[int]) -> tuple[set[int], set[int]]:
    """Rows with a slot some scalar state stores as -inf (an empty slice's maximum), and rows
    whose every slot does."""
    empty = torch.zeros(roles.rows, roles.slots, dtype=torch.bool)
    for pos in states:
        if pos != roles.split_pos[roles.vector]:
            empty |= (_rows(split.after[pos], roles.rows, roles.slots) == float("-inf")).any(dim=2)
    return (set(empty.any(dim=1).nonzero().flatten().tolist()),
            set(empty.all(dim=1).nonzero().flatten().tolist()))


def _spoiled_slot_words(split: apart.KernelCall, roles: apart.Roles, states: list[int], spoiled: list[int]) -> str:
    """Of the slots holding NaN/+Inf, how many store a maximum of -inf (a slice that scored no
    position), in words, with what each kind of slot can come from."""
    maxima = [pos for pos in states if pos != roles.split_pos[roles.vector] and pos not in spoiled
              and bool((split.after[pos] == float("-inf")).any())]
    bad = torch.zeros(roles.rows, roles.slots, dtype=torch.bool)
    for pos in spoiled:
        held = _rows(split.after[pos], roles.rows, roles.slots)
        bad |= (held.isnan() | (held == float("inf"))).any(dim=2)
    empty = _rows(split.after[maxima[0]], roles.rows, roles.slots).eq(float("-inf")).any(dim=2) if maxima \
        else torch.zeros_like(bad)
    # slot 0 holds position 0 of its sequence (every sequence has one) in any split that starts
    # there: a -inf maximum in it is a slice that held positions and whose maximum never took them
    slot0 = bad & empty
    slot0[:, 1:] = False
    unscored = bad & empty & ~slot0  # a slice that scored no position
    n_bad, in_slot0, n_empty = int(bad.sum()), int(slot0.sum()), int(unscored.sum())
    # the other clean scalar states (a running sum) at those slots: 0 there means the NaN arose in o alone
    sums = [pos for pos in states if pos != roles.split_pos[roles.vector] and pos not in spoiled
            and pos not in maxima[:1]]
    zero_sums = [pos for pos in sums
                 if bool((_rows(split.after[pos], roles.rows, roles.slots) == 0).all(dim=2)[unscored].all())]

    def share(count: int, of: int, other: bool = False) -> str:
        if other:
            return f"{count} of the other {of} slots"
        return f"All {of} slots holding it" if count == of else f"{count} of the {of} slots holding it"

    words = ""
    if in_slot0:
        words += (f" {share(in_slot0, n_bad)} store a maximum of -inf ({split.arg_name(maxima[0])}) in slot 0, whose"
                  " slice holds position 0 of its sequence: that slice scored positions, and the maximum it stored"
                  " never took their scores (a maximum over the wrong axis of the score tile, say, or scores masked"
                  " to -inf before it). Then p = exp2(score − (-inf)) is Inf, and Inf − Inf or 0 × Inf is NaN.")
        n_bad -= in_slot0
    if n_empty:
        which = share(n_empty, n_bad, other=bool(in_slot0))
        words += (f" {which} store a maximum of -inf ({split.arg_name(maxima[0])}): a slice that scored no"
                  " position.")
        if zero_sums:
            words += (f" There {split.arg_name(zero_sums[0])} holds 0, not NaN, so the NaN arose in o alone: o divided"
                      " by that l = 0 before it is stored is 0/0, as is a rescale exp2(-inf − (-inf)) applied to o"
                      " and not to l. Such a slice must leave l = 0 and o = 0 as they started. (A split that stores"
                      " o normalised, o / l, must skip that division for an empty slice, and its merge must then"
                      " weigh each o_s by l_s again: a merge written for unnormalised o_s takes o / l for o.)")
        else:
            words += (" There an update that takes exp2(-inf − (-inf)) is NaN, and so is o or l divided by l = 0;"
                      " such a slice must leave l = 0 and o = 0 as they started.")
    if n_bad > n_empty:
        words += (f" {n_bad - n_empty} of them have a finite maximum: there a NaN in the running sums comes from"
                  " 0 × Inf or Inf − Inf in the slice's own arithmetic, as when, on the first tile (m = -inf,"
                  " l = 0, acc = 0), the rescale is exp2(m_new − m_old) = Inf instead of exp2(m_old − m_new) or"
                  " takes -inf − (-inf), or when an exp2 takes a score with no maximum subtracted.")
    return words
