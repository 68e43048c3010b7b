"""`flashtutor launch` for real: in a tmux terminal, driven by keys, read off the screen.

No test harness in between: a real terminal, the real CLI entry point, the
real watcher and worker.  The "editor" is `cp SOLUTION`, which `e` runs on the
drill file with the app suspended, exactly as it would run vim.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_app import WAIT_S, make_workspace

from tutor.catalog import all_drills, get_drill, solution_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
]

WIDTH, HEIGHT = 100, 30


class Terminal:
    """One tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, socket: Path, command: str):
        self.base = ["tmux", "-S", str(socket)]
        subprocess.run([*self.base, "new-session", "-d", "-s", "app", "-x", str(WIDTH), "-y", str(HEIGHT), command],
                       check=True, timeout=30)

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "app", *keys], check=True, timeout=30)

    def screen(self) -> str:
        shown = subprocess.run([*self.base, "capture-pane", "-p", "-t", "app"], capture_output=True, text=True,
                               timeout=30)
        return shown.stdout

    def wait_for(self, text: str, timeout_s: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed {text!r}; it shows:\n{screen}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


def test_launch_in_a_real_terminal(tmp_path):
    workspace = make_workspace(tmp_path)
    editor = f"cp {shlex.quote(str(solution_path(get_drill('01'))))}"
    command = (
        f"cd {shlex.quote(str(workspace))} && "
        # COLUMNS/LINES from pytest's environment would override the terminal's real size
        f"env -u COLUMNS -u LINES EDITOR={shlex.quote(editor)} {shlex.quote(sys.executable)} -m tutor launch"
        " --device cpu; "
        "echo flashtutor exited $?; sleep 600"
    )
    terminal = Terminal(tmp_path / "tmux.sock", command)
    try:
        terminal.wait_for(f"0/{len(all_drills())} drills passed")
        # the rows say "reading progress" until the file's first read lands (the table may paint a frame later)
        terminal.wait_for("· not started  01  Causal masking")
        terminal.keys("Enter")  # open drill 01: it is checked as shipped
        failing = terminal.wait_for("✘  FAILED")
        assert "CPU · Triton interpreter" in terminal.wait_for("watch: native")
        assert "██ xx xx xx" in failing
        terminal.keys("e")  # the "editor" writes the solution; the watcher sees the save
        passing = terminal.wait_for("✔  PASSED")
        passing = terminal.wait_for("ideal 0.625")
        assert "visited      0.625 (20/32 in total)" in passing and "██ ·· ·· ··" in passing
        (tmp_path / "screen.txt").write_text(passing)  # kept with the test's tmp dir, for people to look at
        terminal.keys("q")
        terminal.wait_for("flashtutor exited 0")
    finally:
        terminal.close()
