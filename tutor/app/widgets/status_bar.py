"""The one-line status bar: device, watcher mode, workspace."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

DEVICE_PENDING = "device: starting the check worker…"
SEPARATOR = " │ "


def short_path(path: Path, home: Path | None = None) -> str:
    """``~/x/y`` for paths under the home directory."""
    home = home if home is not None else Path.home()
    try:
        return "~/" + str(path.relative_to(home)) if path != home else "~"
    except ValueError:
        return str(path)


class StatusBar(Static):
    """``device │ watch: native │ workspace``.

    Every screen has its own bar; each follows the app's ``device_label``,
    ``watcher_label`` and ``workspace_label`` reactives (when the app has them).
    """

    device = reactive(DEVICE_PENDING)
    watcher = reactive("watch: starting")
    workspace = reactive("")

    def on_mount(self) -> None:
        if hasattr(self.app, "device_label"):
            self.watch(self.app, "device_label", self._set_device)
            self.watch(self.app, "watcher_label", self._set_watcher)
            self.watch(self.app, "workspace_label", self._set_workspace)

    def _set_device(self, value: str) -> None:
        self.device = value

    def _set_watcher(self, value: str) -> None:
        self.watcher = value

    def _set_workspace(self, value: str) -> None:
        self.workspace = value

    def render(self) -> Text:
        """The watcher mode and the workspace are always whole; a device label too
        long for the line (the interpreter's, at 80 columns) is cut with an ellipsis."""
        rest = Text()
        rest.append(SEPARATOR, style="dim")
        rest.append(self.watcher)
        rest.append(SEPARATOR, style="dim")
        rest.append(self.workspace)
        device = Text(self.device)
        room = self.content_size.width - rest.cell_len
        if 0 < room < device.cell_len:
            device.truncate(room, overflow="ellipsis")
        return Text.assemble(device, rest, no_wrap=True, overflow="ellipsis")
