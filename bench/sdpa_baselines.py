"""torch's SDPA as the benches' baseline: timed under its default dispatch and with
its backends forced, and the backend the default dispatch ran, read from the profiler.

Issue 21: on an H200 with torch 2.11 SDPA's default dispatch ran cuDNN (profiler kernels
cudnn_generated_...sdpa_sm90_flash_fprop_wgmma... / ...bprop...), not FlashAttention-2;
forced FLASH_ATTENTION was about 0.6x of it.  Every bench therefore records the backend
the default dispatch used, and (where it compares against them) times forced
FLASH_ATTENTION and EFFICIENT_ATTENTION beside it; a backend that refuses a shape is
"n/a", never a crash.  The bench scripts in this folder import this module (run as
``python bench/NAME.py``, bench/ is on ``sys.path``); it imports torch only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SDPA_VARIANTS = ("default", "flash", "efficient")  # default dispatch, forced FLASH_ATTENTION, forced EFFICIENT
_SDPA_OPS = {  # the aten op each backend runs as, in the profiler (a backward op adds "_backward")
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math (mps)",
}
_KERNEL_WORDS = ("sdpa", "fmha", "flash", "cudnn", "attention", "attn")


def sdpa_with(variant: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` (a call of SDPA) under SDPA's default dispatch, or with FLASH_ATTENTION or
    EFFICIENT_ATTENTION forced (torch.nn.attention.sdpa_kernel)."""
    if variant == "default":
        return fn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}[variant]

    def forced() -> Any:
        with sdpa_kernel(backend):
            return fn()

    return forced


def sdpa_try(fn: Callable[[], Any]) -> Any:
    """``fn()``, or None when the backend it forces refuses the shape (or the device)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a refusing backend warns why before it raises
        try:
            return fn()
        except (RuntimeError, NotImplementedError, ValueError):
            return None


def sdpa_backend(fn: Callable[[], Any]) -> str:
    """The SDPA backend ``fn`` ran, read from the profiler: the aten ops' backends, and the
    GPU kernels' names as the evidence (``cudnn [cudnn_generated_...sdpa_sm90_flash_fprop...]``)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    names = {event.key for event in prof.key_averages()}
    backends = sorted({_SDPA_OPS[n.removesuffix("_backward")] for n in names if n.removesuffix("_backward") in _SDPA_OPS})
    kernels = sorted(n for n in names if not n.startswith(("aten::", "autograd::"))
                     and any(w in n.lower() for w in _KERNEL_WORDS))
    evidence = f" [{'; '.join(k[:100] for k in kernels[:3])}]" if kernels else ""
    return (", ".join(backends) or "unknown") + evidence


def ms_cell(ms: float | None, digits: int = 3) -> str:
    """A time for a table: "n/a" where the backend refused the shape."""
    return "n/a" if ms is None else f"{ms:.{digits}f}"


@dataclass
class SdpaTimes:
    """One SDPA call timed: ms by variant ("default" always; "flash" and "efficient" when
    forced, None where that backend refused), and the backend the default dispatch ran
    (None when not asked for)."""

    ms: dict[str, float | None]
    backend: str | None

    @property
    def forced(self) -> dict[str, float | None]:
        """The forced backends' times alone (empty when they were not timed)."""
        return {variant: self.ms[variant] for variant in SDPA_VARIANTS[1:] if variant in self.ms}


def time_sdpa(bench: Callable[[Callable[[], Any]], float], fn: Callable[[], Any],
              forced: bool = True, backend: bool = True) -> SdpaTimes:
    """Time ``fn`` (a call of SDPA) with ``bench``: its default dispatch (an error there
    propagates, as the caller's own launch would), then which backend that ran (from the
    profiler), then, with ``forced``, FLASH_ATTENTION and EFFICIENT_ATTENTION forced (None
    where one refuses)."""
    ms: dict[str, float | None] = {"default": bench(fn)}
    ran = sdpa_backend(fn) if backend else None
    if forced:
        for variant in SDPA_VARIANTS[1:]:
            run = sdpa_with(variant, fn)
            ms[variant] = None if sdpa_try(run) is None else bench(run)
    return SdpaTimes(ms, ran)


def dispatch_line(backend: str, forced: dict[str, float | None]) -> str:
    """The line under a shape's timings: what the default dispatch ran, and the forced
    backends' times ("n/a" where one refused or was not timed)."""
    return (f"  sdpa's default dispatch ran: {backend}; forced FLASH_ATTENTION {ms_cell(forced.get('flash'))} ms, "
            f"forced EFFICIENT_ATTENTION {ms_cell(forced.get('efficient'))} ms")
