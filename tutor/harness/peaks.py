"""The device's two ceilings: dense fp16 matrix-multiply rate and memory bandwidth.

A GPU's peaks come from two places, both reported with where they came from:

* a small table of known GPUs (vendor datasheet figures, dense fp16 tensor
  throughput without sparsity, HBM bandwidth);
* a one-time measurement on this device: a large fp16 matmul and a device
  copy, timed with ``triton.testing.do_bench``.  It is cached per device (and
  torch version) in the user's cache directory (``$XDG_CACHE_HOME/flashtutor``
  or ``~/.cache/flashtutor``), never in the workspace.

The roofline uses the measured rates where there are any (they are what this
machine really reaches), else the table.  The interpreter has no peaks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import cast

from tutor.harness.result import Peaks

# name fragment -> (dense fp16 TFLOP/s, HBM GB/s), datasheet figures
KNOWN_GPUS: dict[str, tuple[float, float]] = {
    "H200": (989.0, 4800.0),
    "H100": (989.0, 3350.0),  # SXM; the PCIe card is lower
    "A100": (312.0, 2039.0),  # 80 GB SXM
    "MI300X": (1307.0, 5300.0),
    "MI300A": (980.0, 5300.0),
}

COPY_BYTES = 1 << 30  # 1 GiB copied (read + write: 2 GiB moved)
MATMUL_N = 8192


def table_peaks(device_name: str) -> Peaks | None:
    for fragment, (tflops, gbps) in KNOWN_GPUS.items():
        if fragment.lower() in device_name.lower():
            return {"tflops": tflops, "gbps": gbps, "source": f"datasheet ({fragment})"}
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flashtutor"


def _cache_file() -> Path:
    return cache_dir() / "peaks.json"


def _key(device_name: str, torch_version: str) -> str:
    return f"{device_name} | torch {torch_version}"


def cached_peaks(device_name: str, torch_version: str) -> Peaks | None:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get(_key(device_name, torch_version)) if isinstance(data, dict) else None
    return cast(Peaks, entry) if isinstance(entry, dict) and {"tflops", "gbps"} <= entry.keys() else None


def store_peaks(device_name: str, torch_version: str, peaks: Peaks) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        data[_key(device_name, torch_version)] = peaks
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: measure again next time


def measure_peaks() -> Peaks:
    """Time one large fp16 matmul and one device copy on the current GPU."""
    import torch
    import triton.testing

    a = torch.randn((MATMUL_N, MATMUL_N), device="cuda", dtype=torch.float16)
    b = torch.randn((MATMUL_N, MATMUL_N), device="cuda", dtype=torch.float16)
    mm_ms = triton.testing.do_bench(lambda: a @ b, warmup=25, rep=100, return_mode="median")
    src = torch.empty(COPY_BYTES // 2, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=100, return_mode="median")
    return {
        "tflops": 2 * MATMUL_N**3 / (mm_ms * 1e-3) / 1e12,
        "gbps": 2 * COPY_BYTES / (copy_ms * 1e-3) / 1e9,
        "source": f"measured once on this device ({MATMUL_N}³ fp16 matmul, 1 GiB copy)",
    }


def device_peaks(device_name: str, torch_version: str, measure: bool = True) -> Peaks | None:
    """The peaks the roofline draws against (see the module docstring); GPU only."""
    peaks = cached_peaks(device_name, torch_version)
    if peaks is None and measure:
        try:
            peaks = measure_peaks()
        except Exception:  # noqa: BLE001 - out of memory on a shared GPU: fall back to the table
            peaks = None
        if peaks is not None:
            store_peaks(device_name, torch_version, peaks)
    table = table_peaks(device_name)
    if peaks is None:
        return table
    if table is not None:
        peaks = {**peaks, "datasheet_tflops": table["tflops"], "datasheet_gbps": table["gbps"]}
    return peaks
