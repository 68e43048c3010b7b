"""Drill 07: which term of a pool row the counted loads say is wrong.

A K/V element of sequence b, K/V head h, logical position pos lives at pool row
``(page * KV_HEADS + h) * PAGE_SIZE + slot``, with ``page = block_table[b, pos //
PAGE_SIZE]`` and ``slot = pos % PAGE_SIZE``.  On Triton's interpreter the tutor
counts which pool rows the K loads read (:mod:`tutor.harness.problems.paged_reads`).
Where that set of rows is exactly the set one formula gives for every position the
sequences hold - the right formula with one term changed - the term is named: the
rows read are the measurement, the formula is only the one that reproduces all of
them.  Nothing is said where none, or more than one, reproduces them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tutor.harness.problems.paged_decode import Launch

# (b, h, pos) as NumPy arrays -> flat pool row (may fall outside the pool)
Rows = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _candidates(x: Launch, block_n: int) -> tuple[Rows, dict[str, Rows]]:
    """The right pool row, and it with one term changed, each named by what it changes."""
    c = x.case
    ps, kvh = c.page_size, c.kv_heads
    table = x.inputs.block_table.cpu().numpy().astype(np.int64)
    batch, max_pages = table.shape
    pages = len(x.inputs.owner)
    flat = table.reshape(-1)
    spare = x.inputs.spare_page  # what the table's band holds on both sides

    def at(index: np.ndarray) -> np.ndarray:
        """The flat table's element ``index``, or the spare page its band holds where that is past either end."""
        read: np.ndarray = np.where((index >= 0) & (index < flat.size), flat[np.clip(index, 0, flat.size - 1)], spare)
        return read

    def entry(b: np.ndarray, col: np.ndarray) -> np.ndarray:
        """block_table[b, col] read as the flat table (a column past the row reads the next row)."""
        return at(b * max_pages + col)

    def row(page: np.ndarray, h: np.ndarray, slot: np.ndarray) -> np.ndarray:
        at: np.ndarray = (page * kvh + h) * ps + slot
        return at

    def right(b: np.ndarray, h: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return row(entry(b, pos // ps), h, pos % ps)

    return right, {
        f"the table column pos // BLOCK_N ({block_n}) where pos // PAGE_SIZE ({ps}) belongs":
            lambda b, h, pos: row(entry(b, pos // block_n), h, pos % ps),
        f"the slot pos % BLOCK_N ({block_n}) where pos % PAGE_SIZE ({ps}) belongs":
            lambda b, h, pos: row(entry(b, pos // ps), h, pos % block_n),
        "the block table's rows strided by PAGE_SIZE where MAX_PAGES belongs":
            lambda b, h, pos: row(at(b * ps + pos // ps), h, pos % ps),
        "the block table's row b * KV_HEADS + h (the program's index over (sequence, K/V head)) where the"
        " sequence's row b belongs": lambda b, h, pos: row(entry(b * kvh + h, pos // ps), h, pos % ps),
        "the block table's two indices exchanged, entry (pos // PAGE_SIZE) * MAX_PAGES + b where b * MAX_PAGES"
        " + pos // PAGE_SIZE belongs": lambda b, h, pos: row(at((pos // ps) * max_pages + b), h, pos % ps),
        "the block table read column-major, entry (pos // PAGE_SIZE) * BATCH + b where b * MAX_PAGES +"
        " pos // PAGE_SIZE belongs": lambda b, h, pos: row(at((pos // ps) * batch + b), h, pos % ps),
        "the K/V head b * KV_HEADS + h (the program's index over (sequence, K/V head)) where h belongs":
            lambda b, h, pos: row(entry(b, pos // ps), b * kvh + h, pos % ps),
        "the K/V head h * GROUP (the index of its group's first query head) where h belongs":
            lambda b, h, pos: row(entry(b, pos // ps), h * c.group, pos % ps),
        "the page pos // PAGE_SIZE itself, the block table not read":
            lambda b, h, pos: row(pos // ps, h, pos % ps),
        "the page and the slot computed the other way round: block_table[b, pos % PAGE_SIZE] and slot"
        " pos // PAGE_SIZE": lambda b, h, pos: row(entry(b, pos % ps), h, pos // ps),
        "the position pos where the slot pos % PAGE_SIZE belongs":
            lambda b, h, pos: row(entry(b, pos // ps), h, pos),
        "the pool row without the K/V head: page * PAGE_SIZE + slot":
            lambda b, h, pos: entry(b, pos // ps) * ps + pos % ps,
        "the pool laid out head-major: (h * NUM_PAGES + page) * PAGE_SIZE + slot":
            lambda b, h, pos: (h * pages + entry(b, pos // ps)) * ps + pos % ps,
        "the pool laid out head-major with the table's width: (h * MAX_PAGES + page) * PAGE_SIZE + slot":
            lambda b, h, pos: (h * max_pages + entry(b, pos // ps)) * ps + pos % ps,
        "the pool laid out head-last: (page * PAGE_SIZE + slot) * KV_HEADS + h":
            lambda b, h, pos: (entry(b, pos // ps) * ps + pos % ps) * kvh + h,
        "the page and the slot exchanged: (slot * KV_HEADS + h) * PAGE_SIZE + page":
            lambda b, h, pos: ((pos % ps) * kvh + h) * ps + entry(b, pos // ps),
    }


def layout_words(x: Launch, counts: np.ndarray, outside: int, block_n: int) -> str:
    """" <measured>" naming the one changed term whose formula gives exactly the pool rows the K
    loads read, each as many times (``counts``: (num_pages, kv_heads, page_size) reads of each
    row; ``outside``: elements read outside the pool); "" where the right formula does, or no
    one changed term, or more than one, reproduces them."""
    c = x.case
    b, h, pos = (np.concatenate(parts) for parts in zip(*(
        (np.full(n * c.kv_heads, s), np.repeat(np.arange(c.kv_heads), n), np.tile(np.arange(n), c.kv_heads))
        for s, n in enumerate(c.lengths)), strict=True))
    measured = counts.reshape(-1).astype(np.int64)

    def reproduces(rows_of: Rows) -> bool:
        """Row by row, as many reads as (sequence, head, position) triples the formula sends there,
        times one factor for every row (a GQA group that reads each row once per query head)?"""
        rows = rows_of(b, h, pos)
        inside = (rows >= 0) & (rows < measured.size)
        if bool((~inside).any()) != (outside > 0):
            return False
        predicted = np.bincount(rows[inside], minlength=measured.size)
        total, read = int(predicted.sum()), int(measured.sum())
        return bool(total and read % total == 0 and read >= total and (measured == read // total * predicted).all())

    right, changed = _candidates(x, block_n)
    fitting = [name for name, rows_of in changed.items() if reproduces(rows_of)]
    if len(fitting) != 1 or reproduces(right):
        return ""
    return (" The pool rows the K loads read (counted) are exactly the rows, each as many times, that the right"
            " formula gives with one term changed, for every position the sequences hold:"
            f" {fitting[0]} (the right row is (page * KV_HEADS + h) * PAGE_SIZE + slot, page ="
            " block_table[b, pos // PAGE_SIZE], slot = pos % PAGE_SIZE).")
