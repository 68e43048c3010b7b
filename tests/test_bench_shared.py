"""The benches' shared parts (bench/sdpa_baselines.py, bench/bench_common.py), run for real
on the CPU with tiny tensors, and every bench that uses them starting (``--help``).
The benches' GPU figures themselves are measured on a GPU (bench/gpu_run.sh)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from tutor.harness.device import interpreter_supports, select_device

if not interpreter_supports(version("triton")):  # a GPU image's Triton 3.6: no interpreter to run these on
    pytest.skip(f"triton {version('triton')}'s interpreter cannot run the drills", allow_module_level=True)
select_device("cpu")  # TRITON_INTERPRET before triton's import (the fast decode solution imports it)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import bench_common  # noqa: E402
import sdpa_baselines as sb  # noqa: E402

BENCHES = ("attention_speed", "backward_speed", "decode_speed", "paged_decode_speed", "varlen_speed",
           "block_sparse_speed", "sliding_window_speed", "warp_specialize")


def _sdpa_call():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 32, generator=gen) for _ in range(3))
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)


def test_time_sdpa_times_each_variant_and_names_the_backend_the_default_ran():
    calls = []

    def bench(fn) -> float:
        calls.append(fn)
        fn()
        return float(len(calls))

    timed = sb.time_sdpa(bench, _sdpa_call())
    assert list(timed.ms) == list(sb.SDPA_VARIANTS)
    assert timed.ms["default"] == 1.0  # timed first, under the default dispatch
    assert set(timed.forced) == {"flash", "efficient"}
    assert all(ms is None or ms > 1 for ms in timed.forced.values())  # timed after it, or refused
    assert timed.backend is not None
    assert timed.backend.split(" [")[0].split(", ")[0] in set(sb._SDPA_OPS.values())
    alone = sb.time_sdpa(bench, _sdpa_call(), forced=False, backend=False)
    assert (list(alone.ms), alone.backend, alone.forced) == (["default"], None, {})


def test_a_refusing_backend_is_none_and_a_forced_one_runs_under_its_backend():
    def refuses():
        raise RuntimeError("No available kernel")

    assert sb.sdpa_try(refuses) is None
    assert sb.sdpa_try(lambda: 3) == 3
    call = _sdpa_call()
    assert sb.sdpa_with("default", call) is call
    forced = sb.sdpa_try(sb.sdpa_with("flash", call))
    if forced is not None:  # CPU builds with the flash kernel: the forced call gives SDPA's answer
        torch.testing.assert_close(forced, call())
        assert sb.sdpa_backend(sb.sdpa_with("flash", call)).startswith("flash")


def test_cells_and_the_dispatch_line():
    assert sb.ms_cell(None) == "n/a"
    assert sb.ms_cell(1.23456) == "1.235"
    assert sb.ms_cell(0.5, 2) == "0.50"
    assert sb.dispatch_line("cudnn", {"flash": 2.0, "efficient": None}) == (
        "  sdpa's default dispatch ran: cudnn; forced FLASH_ATTENTION 2.000 ms, forced EFFICIENT_ATTENTION n/a ms")


def test_the_interpreter_timer_warms_up_once_then_takes_the_median(monkeypatch):
    calls = []
    clock = iter([0.0, 0.001, 0.0, 0.005, 0.0, 0.002])  # three samples: 1, 5 and 2 ms

    monkeypatch.setattr(bench_common.time, "perf_counter", lambda: next(clock))
    ms = bench_common.timer(interpreter=True, samples=3)(lambda: calls.append(1))
    assert len(calls) == 4  # the warm-up and three samples
    assert ms == pytest.approx(2.0)


def test_load_registers_the_module_under_its_stem(tmp_path):
    path = tmp_path / "bench_kernel_x.py"
    path.write_text("VALUE = 7\n", encoding="utf-8")
    module = bench_common.load(path)
    assert module.VALUE == 7 and sys.modules["bench_kernel_x"] is module
    del sys.modules["bench_kernel_x"]


def test_a_decode_row_gets_its_fastest_split_and_the_bandwidths():
    row = {"sdpa_ms": 2.0, "default_ms": 4.0, "split_ms": {1: 8.0, 4: 4.0, 8: 1.0, 16: 2.0}}
    bench_common.best_split(row, gbytes=2.0)
    assert (row["best_splits"], row["best_ms"]) == (8, 1.0)
    assert (row["sdpa_gbs"], row["default_gbs"], row["best_gbs"]) == (1000.0, 500.0, 2000.0)
    assert [bench_common.gbs(x) for x in (2000.4, 9.87, 0.123)] == ["2000", "9.9", "0.12"]


def test_the_decode_summary_writes_every_number_and_repeats_the_header(tmp_path, capsys):
    import json

    rows = [{"batch": 2, "sdpa_ms": 1.5}]
    bench_common.decode_summary_head(tmp_path / "n.json", "CPU", "device: CPU", ["drill: ok", "solution: ok"], rows)
    written = json.loads((tmp_path / "n.json").read_text(encoding="utf-8"))
    assert (written["device"], written["checks"], written["rows"]) == ("CPU", ["drill: ok", "solution: ok"], rows)
    assert capsys.readouterr().out == "\ndevice: CPU\ndrill: ok\nsolution: ok\n\n"


def test_flex_on_the_interpreter_is_eager_or_says_why_not():
    flex, create, why = bench_common.load_flex(interpreter=True)
    if flex is None:
        assert why
    else:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        assert (flex, create, why) == (flex_attention, create_block_mask, "")


def test_the_fast_decode_solution_says_its_split_count():
    path = REPO / "solutions" / "05_split_kv_decode_fast.py"
    spec = importlib.util.spec_from_file_location("fast05_split_count", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.split_count(8, 32, 4096, "cpu") == module.NUM_SPLITS  # off a GPU: the fixed count


@pytest.mark.parametrize("name", BENCHES)
def test_every_bench_imports_names_the_shared_modules_have(name):
    tree = ast.parse((REPO / "bench" / f"{name}.py").read_text(encoding="utf-8"))
    shared = {"bench_common": bench_common, "sdpa_baselines": sb}
    imported = [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if node.module in shared]
    assert ("bench_common", "load") in imported  # every one loads its kernels through the shared loader
    assert any(module == "sdpa_baselines" for module, _ in imported)
    assert "attention_speed" not in {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    for module, attr in imported:
        assert hasattr(shared[module], attr), f"{name} imports {module}.{attr}, which is not there"


@pytest.mark.parametrize("name", BENCHES)
def test_every_bench_starts(name):
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{name}.py"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_the_warp_specialised_copy_changes_the_fast_kernels_one_loop_only(tmp_path):
    import warp_specialize

    copy = warp_specialize.specialised_copy(tmp_path).read_text()
    original = warp_specialize.FAST.read_text()
    assert copy.count("warp_specialize=True") == 1
    assert copy.replace(", warp_specialize=True)", ")") == original


def test_the_backward_trial_copy_adds_the_extra_configs_at_head_dim_128_only(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "backward_configs_trial.py"), str(tmp_path / "t.py")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("trial04_configs", tmp_path / "t.py")
    assert spec is not None and spec.loader is not None
    trial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trial)
    shipped = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location(
        "shipped04_configs", REPO / "solutions" / "04_flash_backward_fast.py"))
    spec.loader.exec_module(shipped)
    assert trial._DKDV_CONFIGS[64] == shipped._DKDV_CONFIGS[64] and trial._DQ_CONFIGS[64] == shipped._DQ_CONFIGS[64]
    assert trial._DKDV_CONFIGS[128][:len(shipped._DKDV_CONFIGS[128])] == shipped._DKDV_CONFIGS[128]
    assert (32, 128, 4, 3) in trial._DKDV_CONFIGS[128] and (128, 32, 4, 3) in trial._DQ_CONFIGS[128]
