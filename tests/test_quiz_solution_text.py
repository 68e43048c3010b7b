"""The numbers written in solutions/03_flash_math_solution.md equal the engine's.

The solution is prose for people; this test reads its tables and headline
numbers back and recomputes each one with tutor/quiz/formulas.py, so an edit
to either side that breaks the agreement fails here.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from tutor.catalog import get_drill, pristine_path, solution_path
from tutor.quiz import build_questions
from tutor.quiz import formulas as f
from tutor.quiz.gpu import STATED_BUDGETS
from tutor.quiz.units import format_bytes

D, B = 128, 2  # the solution's table: d = 128, fp16


@pytest.fixture(scope="module")
def text() -> str:
    return solution_path(get_drill("03")).read_text(encoding="utf-8")


def table_after(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first markdown table after ``heading``, as cell lists."""
    section = text[text.index(heading):]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return [row for row in rows[1:] if not set("".join(row)) <= set("-: ")]


def integer(cell: str) -> int:
    return int(re.match(r"[\d,]+", cell).group(0).replace(",", ""))


def test_the_traffic_table(text):
    rows = table_after(text, "## The table")
    assert [integer(row[0]) for row in rows] == [1024, 4096, 16384]
    for n_cell, naive, fused, ratio in rows:
        n = integer(n_cell)
        assert naive == format_bytes(f.naive_hbm_bytes(n, D, B))
        assert fused == format_bytes(f.fused_hbm_bytes(n, D, B))
        assert Fraction(ratio) == f.traffic_ratio(n, D) == 1 + Fraction(n, D)


def test_the_table_agrees_with_the_quiz(text):
    questions = {q.id: q for q in build_questions()}
    for n_cell, naive, fused, _ in table_after(text, "## The table"):
        n = integer(n_cell)
        assert integer(naive) == questions[f"naive-bytes:N={n},d={D},fp16"].answer
        assert integer(fused) == questions[f"fused-bytes:N={n},d={D},fp16"].answer


def test_headline_numbers(text):
    assert "**129x**" in text and f.traffic_ratio(16384, D) == 129
    assert "**137,438,953,472 FLOPs**" in text and f.forward_flops(16384, D) == 137_438_953_472
    assert re.search(r"d/2 = \*\*64\s+FLOP/byte\*\*", text) and f.naive_intensity_limit(D, B) == 64
    assert f"{f.naive_hbm_bytes(16384, D, B):,} bytes" in text
    shares = re.search(r"(\S+) % at 1k, (\S+) % at\s+4k, (\S+) % at 16k", text).groups()
    for share, n in zip(shares, (1024, 4096, 16384), strict=True):
        assert share == f"{100 * 4 * n * n / f.naive_elements(n, D):.1f}"


def test_the_intensity_table(text):
    rows = table_after(text, "naive intensity (FLOP/byte")
    assert len(rows) == 3
    for n_cell, value in rows:
        n = integer(n_cell)
        exact, decimal = (part.strip() for part in value.split("="))
        assert Fraction(exact) == f.naive_intensity(n, D, B)
        assert decimal == f"{float(f.naive_intensity(n, D, B)):.2f}"


def test_the_budget_table(text):
    rows = table_after(text, "| budget")
    assert len(rows) == 4
    for label, budget_bytes, longest, binary in rows:
        name = label.split()[0]
        budget = int(budget_bytes.replace(",", ""))
        if "L2" in label:
            assert budget == STATED_BUDGETS[name].l2_bytes
            assert integer(longest) == f.longest_fitting_sequence(budget, B)
            mib, n = re.fullmatch(r"(\d+) MiB: ([\d,]+)", binary).groups()
            assert integer(n) == f.longest_fitting_sequence(int(mib) * 2**20, B)
        else:
            batch, heads = (int(x) for x in re.search(r"(\d+) x (\d+) heads", label).groups())
            assert budget == STATED_BUDGETS[name].hbm_bytes
            assert integer(longest) == f.longest_fitting_sequence(budget, B, batch * heads)


def test_the_worked_budget_numbers(text):
    assert "50,020,002 bytes" in text and f.score_matrix_bytes(5001, B) == 50_020_002
    assert "156,250,000 = 12,500²" in text and 80 * 10**9 // (256 * 2) == 156_250_000 == 12_500**2


def test_the_measured_h200_numbers(text):
    l2, memory = 62_914_560, 150_109_880_320  # what torch reported on an H200
    assert f"`L2_cache_size` = {l2:,} bytes" in text and l2 == 60 * 2**20
    assert f"`total_memory` = {memory:,} bytes" in text
    n_l2, n_hbm = (integer(x) for x in re.search(r"N = ([\d,]+) \(L2\) and N = ([\d,]+) \(HBM", text).groups())
    assert n_l2 == f.longest_fitting_sequence(l2, B)
    assert n_hbm == f.longest_fitting_sequence(memory, B, 8 * 32)


def test_the_causal_numbers(text):
    visited, total = f.causal_block_count(1000, 64)
    assert f"{visited} of {total} pairs" in text
    assert "**17/32 = 0.53125**" in text and f.causal_visited_fraction(1000, 64) == Fraction(17, 32)
    assert "129/256 at\nN = 16,384 with 128 x 128 tiles" in text
    assert f.causal_visited_fraction(16384, 128) == Fraction(129, 256)


def test_the_drill_asks_what_the_solution_answers():
    body = pristine_path(get_drill("03")).read_text(encoding="utf-8")
    for phrase in ("| 1,024", "| 4,096", "| 16,384", "50,000,000 bytes", "141 x 10^9 bytes", "N = 1,000"):
        assert phrase in body


def test_the_backward_decode_and_window_numbers(text):
    n, d, b = 16384, D, B
    assert f"{f.backward_flops(n, d):,} FLOPs" in text and "**2.5x**" in text
    assert f.backward_flops_ratio() == Fraction(5, 2) and "**5 matmuls**" in text
    assert f"**{f.backward_read_bytes(n, d, b):,} bytes**" in text
    assert f"{f.stored_p_bytes(n, b):,} bytes" in text
    assert f"{f.stored_p_bytes(n, b) // (4 * n):,} times the bytes of L" in text
    assert f"**{f.kv_bytes_per_token(8, d, b):,} bytes** per cached token" in text
    assert f"({f.kv_bytes_per_token(32, d, b):,} with one K/V head" in text
    assert f"**{f.decode_intensity(32, 8, b)} FLOP/byte**" in text
    assert f"**{f.kv_bytes_per_token(8, d, b, 32):,} bytes** (128 KiB)" in text
    assert f"{f.kv_bytes_per_token(32, d, b, 32):,} bytes (512 KiB)" in text
    assert f"{f.kv_bytes_per_token(8, d, b, 32) * 8192:,} bytes (1 GiB)" in text
    assert f"**{f.gqa_saving(32, 8)}x**" in text
    assert "**952 of 4,096**" in text and f.window_block_count(4096, 1024, 64) == (952, 4096)
    for n_cell, w_cell, counts, fraction in table_after(text, "| N      | W "):
        visited, total = (integer(part.strip()) for part in counts.split("/"))
        assert f.window_block_count(integer(n_cell), integer(w_cell), 64) == (visited, total)
        assert fraction == f"{visited / total:.4f}"


def test_the_drill_lists_the_new_questions():
    drill = pristine_path(get_drill("03")).read_text(encoding="utf-8")
    assert "## Part 5: the backward pass, decoding and windows" in drill
    kinds = {q.kind for q in build_questions()}
    assert {"backward-flops", "backward-bytes", "lse-saves", "decode-bytes", "decode-intensity",
            "decode-bound", "kv-cache", "gqa-saving", "window-blocks"} <= kinds


def test_the_tiled_traffic_and_the_drill04_count(text):
    """Issue 21: the compulsory count is a lower bound; a tiled kernel without a cache moves Θ(N²d²/M);
    FlashAttention-2's backward runs five matmuls, drill 04's seven (+40 %)."""
    n, d, b, sram = 16384, D, B, 128 * 1024
    assert f"**{f.tiled_hbm_bytes(n, d, b, sram):,}\nbytes**" in text
    assert f.tiled_query_block_rows(d, b, sram) == 128
    assert "Θ(N²·d²/M)" in text and "Theorem 2" in text
    assert f.drill04_extra_flops() == Fraction(2, 5) and "**+40 %**" in text
    assert len(f.DRILL04_BACKWARD_MATMULS) == 7 and len(f.BACKWARD_MATMULS) == 5
    questions = {q.kind: q for q in build_questions()}
    assert questions["tiled-traffic"].answer == f.tiled_hbm_bytes(n, d, b, sram)
    assert "Algorithm 2" in questions["backward-flops"].text
