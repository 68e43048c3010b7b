"""Drill 06's diagnosis phase (issues 21 and 22): its probe launches reuse the
variants the verdict compiled (the shape, dtypes, window and visit arguments of
some correctness case), its codes are said only where every failing case's
read-out supports them, and the cases hold the windows and head ratios the
issues ask for.  Interpreter kernels; every file written goes under tmp_path."""

from __future__ import annotations

import pytest
import torch
from helpers_harness import entry_module

from tutor.authoring import student_kernels as mistakes
from tutor.catalog import get_drill
from tutor.harness.device import select_device
from tutor.harness.problems import sliding_window_gqa as swa

DRILL = get_drill("06")
ENTRIES = {e.name: e for e in mistakes.load(DRILL)}


def test_the_cases_hold_the_windows_and_ratios_of_issue_21():
    for interpreter in (True, False):
        for blocks in ((64, 64), (32, 64), (64, 32), (128, 64), (64, 128)):
            cases = swa.cases_for(interpreter, None, *blocks)
            block_m, block_n = blocks
            assert any(c.window == 1 for c in cases)
            edge = [c for c in cases if c.window == block_n + 1]
            assert edge and all(c.seq % block_m == 0 and c.seq % block_n == 0 for c in edge)
            # a query block whose first window key is a K/V block's first key, past key 0:
            # a lower bound one key too early visits one block more there
            assert any(i * block_m - c.window + 1 > 0 and (i * block_m - c.window + 1) % block_n == 0
                       for c in edge for i in range(c.seq // block_m))
            assert any(c.window > c.seq for c in cases)
            ratios = {(c.heads, c.heads_kv) for c in cases}
            assert (8, 2) in ratios and (4, 1) in ratios


@pytest.fixture(scope="module", autouse=True)
def device():
    return select_device("auto")  # on a machine without a GPU: Triton's interpreter


def _module(tmp_path, name):
    return entry_module("06", name, tmp_path)


def _recording(module, calls):
    launcher = module.attention

    def attention(q, k, v, window, out=None, visits=None):
        calls.append((tuple(q.shape), tuple(k.shape), q.dtype, k.dtype, v.dtype, window, visits is not None,
                      q.data_ptr() % 16, k.data_ptr() % 16, v.data_ptr() % 16))
        return launcher(q, k, v, window, out=out, visits=visits)

    module.attention = attention
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", ["window_is_block_n", "diagonal_excluded"])
def test_probe_launches_reuse_a_variant_the_verdict_compiled(tmp_path, name):
    calls: list[tuple] = []
    module = _recording(_module(tmp_path, name), calls)
    gen = torch.Generator().manual_seed(3)
    correctness = swa.check_correctness(DRILL, module, True, "cpu", gen)
    verdict = set(calls)
    assert len(calls) == len(swa.CPU_CASES)
    del calls[:]
    diagnosed = correctness.diagnose()
    assert calls, "the diagnosis read nothing out"
    assert set(calls) <= verdict, set(calls) - verdict
    assert [d.code for d in diagnosed.diagnosis] == list(ENTRIES[name].codes)


def _finding(code, fits=()):
    return swa.WindowFinding(code, f" {code}.", tuple(fits))


def test_a_code_is_said_only_where_every_case_read_out_supports_it():
    # a case whose loop never cuts the window cannot tell the two apart: the specific one is said
    said = swa.agreed_findings({"short": [_finding("window-unmasked", ["far-block-unmasked"])],
                                "default": [_finding("far-block-unmasked")]})
    assert [f.code for f in said] == ["far-block-unmasked"]
    # cases that disagree, with nothing in common: nothing is said
    assert swa.agreed_findings({"a": [_finding("window-off-by-one")], "b": [_finding("future-keys-seen")]}) == []
    # one fact, said once, though the two cases name it by two codes that fit each other
    said = swa.agreed_findings({"a": [_finding("window-off-by-one", ["window-size-wrong"])],
                                "b": [_finding("window-size-wrong", ["window-off-by-one"])]})
    assert len(said) == 1
    # the general fact every case supports
    said = swa.agreed_findings({"a": [_finding("far-block-unmasked", ["weight-outside-window"])],
                                "b": [_finding("weight-outside-window")]})
    assert [f.code for f in said] == ["weight-outside-window"]
    assert swa.agreed_findings({}) == []


@pytest.mark.slow
def test_the_readout_is_at_the_cases_own_shape_and_reads_every_query_head(tmp_path):
    module = _module(tmp_path, "window_shifted_back")
    case = swa.Case("t", 1, 4, 1, 70, 64, 5)
    weights, visits = swa.weight_readout(module, case, "cpu", torch.Generator().manual_seed(1))
    assert weights.shape == (4, 70, 70) and visits.shape == (4, 2, 2)
    for h in range(4):
        for r in range(1, 70):
            support = (weights[h, r] > 0).nonzero().flatten().tolist()
            first = max(r - 5, 0 if r < 64 else 0)
            assert support == list(range(first, r)), (h, r)
    found = swa.read_window(weights, visits, case, 64, 64)
    assert [f.code for f in found] == ["window-shifted"]
    assert "stops 1 key before the row" in found[0].detail
