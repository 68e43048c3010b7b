"""The one-line status bar: device, watcher mode, workspace."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

DEVICE_PENDING = "device: starting the check worker…"
SEPARATOR = " │ "
MIN_PATH = 24  # columns of the workspace path kept when the line is short of room


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
        """All three on one line.  Where they do not fit (the interpreter's long
        label at 80 columns, a deep workspace path), the path is cut at its start
        down to MIN_PATH columns, then the device label at its end; the watcher
        mode is always whole."""
        width = self.content_size.width
        fixed = len(self.watcher) + 2 * len(SEPARATOR)
        device, workspace = self.device, self.workspace
        if width and len(device) + len(workspace) + fixed > width:
            workspace_room = min(len(workspace), max(MIN_PATH, width - fixed - len(device)))
            if len(workspace) > workspace_room:
                workspace = "…" + workspace[len(workspace) - workspace_room + 1:]
            device_room = max(1, width - fixed - len(workspace))
            if len(device) > device_room:
                device = device[: device_room - 1] + "…"
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(device)
        text.append(SEPARATOR, style="dim")
        text.append(self.watcher)
        text.append(SEPARATOR, style="dim")
        text.append(workspace)
        return text
