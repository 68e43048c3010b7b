"""The roofline in words and a small terminal drawing, shared by the report and the app.

The figures themselves are counted in the worker (:mod:`tutor.harness.roofline`).
"""

from __future__ import annotations

from tutor.harness.result import Roofline


def human(value: float, unit: str) -> str:
    """1.3 GFLOP, 420.0 KB: three significant figures with an SI prefix."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def bar(fraction: float, width: int = 20) -> str:
    """A bar of ``width`` cells filled to ``fraction`` (clipped to 0..1), with an end mark."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "·" * (width - filled) + "|"


def lines(roof: Roofline) -> list[str]:
    """The roofline as plain text lines."""
    out = []
    peaks = roof.peaks
    for launch in roof.launches:
        out.append(
            f"{'  ' + launch.mode:<14}: {human(launch.flops, 'FLOP')}, {human(launch.bytes, 'B')} of tile loads and"
            " stores "
            f"({launch.intensity:.0f} FLOP/B); ideal {human(launch.ideal_flops, 'FLOP')}, "
            f"{human(launch.ideal_bytes, 'B')}"
        )
        if launch.tflops is not None and launch.gbps is not None and peaks:
            compute = launch.tflops / peaks["tflops"]
            memory = launch.gbps / peaks["gbps"]
            out.append(f"  compute {bar(compute)} {launch.tflops:.0f}/{peaks['tflops']:.0f} TFLOP/s")
            out.append(f"  memory  {bar(memory)} {launch.gbps:.0f}/{peaks['gbps']:.0f} GB/s (tile loads and stores)")
            if launch.bound and roof.ridge is not None:
                out.append(f"  {launch.bound}-bound at this shape (ridge {roof.ridge:.0f} FLOP/B)")
        if launch.sdpa_tflops is not None:
            out.append(f"  torch sdpa: {launch.sdpa_tflops:.0f} TFLOP/s at the ideal FLOPs")
    return out
