"""The student's kernel on a roofline: counted work, drill 03's ideal, and (GPU) bars
of the achieved rates against the device's two ceilings."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tutor.harness.result import Roofline
from tutor.roofline import bar, human


def roofline_text(roof: Roofline | None, interpreter: bool) -> Text:
    """On the interpreter counts only, never a rate."""
    text = Text()
    if roof is None:
        return text
    peaks = roof.peaks
    for k, launch in enumerate(roof.launches):
        if k:
            text.append("\n")
        text.append(f"{launch.mode:<7}", style="bold")
        text.append(f"{human(launch.flops, 'FLOP')} · {human(launch.bytes, 'B')} tile loads")
        text.append(f"  ideal {human(launch.ideal_flops, 'FLOP')} · {human(launch.ideal_bytes, 'B')}",
                    style="dim")
        if launch.tflops is not None and launch.gbps is not None and peaks:
            text.append("\n       compute ")
            text.append(bar(launch.tflops / peaks["tflops"], 16), style="green")
            text.append(f" {launch.tflops:.0f}/{peaks['tflops']:.0f} TFLOP/s")
            text.append("\n       memory  ")
            text.append(bar(launch.gbps / peaks["gbps"], 16), style="cyan")
            text.append(f" {launch.gbps:.0f}/{peaks['gbps']:.0f} GB/s")
            if launch.bound:
                text.append(f"\n       {launch.bound}-bound at this shape", style="bold")
        if launch.sdpa_tflops is not None:
            text.append(f"\n       torch sdpa {launch.sdpa_tflops:.0f} TFLOP/s", style="dim")
    note = roof.counted_on + ("; counts only on the interpreter, no rates" if interpreter else "")
    text.append(f"\n{note}", style="dim")
    return text


class RooflineView(Static):
    """Hidden until a performance phase brought a roofline."""

    def show(self, roof: Roofline | None, interpreter: bool) -> None:
        self.display = roof is not None
        self.update(roofline_text(roof, interpreter))
