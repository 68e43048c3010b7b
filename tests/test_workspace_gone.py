"""`flashtutor watch` while its workspace is deleted and comes back: it says the
drills are gone, waits, and checks the next save once they are back (issue 23,
item 6: before, every worker started in the deleted folder died loading torch,
in a loop).  A real `watch` process, the real watcher, the interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers_loop import EventLog, drill_file, make_workspace, save_by_rename, solution

pytestmark = pytest.mark.slow  # a real watch process and its workers


def test_watch_says_the_workspace_is_gone_and_resumes_when_it_is_back(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws")
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace), "NO_COLOR": "1"}
    # started inside the workspace, as a student does: the folder it runs in is deleted too
    proc = subprocess.Popen([sys.executable, "-m", "tutor", "watch", "01", "--device", "cpu"], cwd=workspace,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    lines = EventLog()
    threading.Thread(target=lambda: [lines(line) for line in proc.stdout], daemon=True).start()
    try:
        lines.wait_for(lambda line: "result        : FAILED" in line)  # the drill as shipped
        mark = lines.mark()
        shutil.rmtree(workspace)
        lines.wait_for(lambda line: "is gone" in line and "waiting for it to come back" in line, after=mark)
        make_workspace(workspace)
        save_by_rename(drill_file(workspace, "01"), solution("01"))
        lines.wait_for(lambda line: "result        : PASSED" in line, after=mark, timeout=120)
        fatal = [line for line in lines.events[mark:] if "FATAL" in line or "could not start" in line]
        assert not fatal, fatal
        proc.stdin.write("q\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
