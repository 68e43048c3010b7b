"""`flashtutor watch` reads single keys in a terminal and lines otherwise.

Its prompts read as single keys (h, n, q), but it used to read a whole line per
key: in a terminal `h` without Enter did nothing and stayed buffered, and later
came back as `unknown key 'hhq'`.  Now a terminal is put in cbreak mode (and
restored on exit); a pipe is still read a line at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from tutor.state.workspace import init_workspace

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 120.0


class Output:
    """Collects a process's stdout on a thread; waits for text to appear."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.text = ""
        self._cond = threading.Condition()
        threading.Thread(target=self._pump, args=(proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen) -> None:
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            with self._cond:
                self.text += chunk.decode("utf-8", errors="replace")
                self._cond.notify_all()

    def wait_for(self, needle: str, after: int = 0) -> int:
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while needle not in self.text[after:]:
                left = deadline - time.monotonic()
                assert left > 0, f"{needle!r} never came; got:\n{self.text}"
                self._cond.wait(left)
            return self.text.index(needle, after) + len(needle)


def watch(workspace: Path, stdin, **env_vars: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLASHTUTOR_WORKSPACE": str(workspace), "NO_COLOR": "1", **env_vars}
    return subprocess.Popen([sys.executable, "-m", "tutor", "watch", "01", "--device", "cpu", "--no-timing"],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=workspace, env=env)


@pytest.mark.slow
def test_in_a_terminal_each_key_acts_at_once_and_the_terminal_is_restored(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    assert before[3] & termios.ICANON  # a terminal reads lines until told otherwise
    proc = watch(workspace, slave)
    try:
        out = Output(proc)
        seen = out.wait_for("q: quit")
        os.write(master, b"h")  # no Enter
        seen = out.wait_for("hint 1: Where the two TODOs live", seen)
        assert not termios.tcgetattr(slave)[3] & termios.ICANON  # cbreak while watching
        os.write(master, b"x")
        seen = out.wait_for("unknown key 'x'", seen)
        os.write(master, b"q")
        assert proc.wait(timeout=WAIT_S) == 0, out.text
        assert termios.tcgetattr(slave) == before  # restored on exit
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        os.close(slave)
    assert "unknown key 'hx" not in out.text and "Traceback" not in out.text


@pytest.mark.slow
def test_from_a_pipe_it_reads_lines(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    proc = watch(workspace, subprocess.PIPE)
    out = Output(proc)
    seen = out.wait_for("q: quit")
    proc.stdin.write(b"h\n")
    proc.stdin.flush()
    out.wait_for("hint 1: Where the two TODOs live", seen)
    proc.stdin.write(b"q\n")
    proc.stdin.flush()
    assert proc.wait(timeout=WAIT_S) == 0, out.text


@pytest.mark.slow
def test_the_drill_file_and_the_error_line_are_links_where_the_terminal_renders_them(tmp_path: Path) -> None:
    """As in `flashtutor check`: OSC 8 hyperlinks when tutor.links says the terminal
    renders them (FORCE_HYPERLINK=1 stands in for one), plain text otherwise."""
    workspace = init_workspace(tmp_path / "ws").workspace
    broken = workspace / "drills" / "01_causal_mask.py"
    broken.write_text("import triton\n\ndef attention(q, k, v:\n    pass\n", encoding="utf-8")
    uri = f"file://{broken.resolve()}"
    for forced in ("1", "0"):
        proc = watch(workspace, subprocess.PIPE, FORCE_HYPERLINK=forced)
        out = Output(proc)
        out.wait_for("message")  # the syntax error's report is out
        proc.stdin.write(b"q\n")
        proc.stdin.flush()
        assert proc.wait(timeout=WAIT_S) == 0, out.text
        where = f"{broken.resolve()}:3"
        if forced == "1":
            assert f"\033]8;;{uri}\033\\drills/01_causal_mask.py\033]8;;\033\\ · save" in out.text  # the header
            assert f"(\033]8;;{uri}\033\\01_causal_mask.py\033]8;;\033\\)" in out.text  # the report's title
            assert f"\033]8;;{uri}\033\\{where}\033]8;;\033\\" in out.text  # the error's file:line
        else:
            assert "\033]8;;" not in out.text
            assert "drills/01_causal_mask.py · save" in out.text and where in out.text
