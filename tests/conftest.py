"""Shared test set-up. Area-specific helpers live in tests/helpers_*.py."""

import hashlib
import os
from pathlib import Path

import pytest

# Never let a developer's GPU or workspace leak into the tests.
os.environ.setdefault("FLASHTUTOR_TEST", "1")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def kernels_run_where_a_worker_would_run_them():
    """Pick the device once per test process, as a check's worker does before it imports
    triton: without a GPU, Triton's interpreter with the tutor's patches.  Tests that
    launch a kernel in-process would otherwise depend on an earlier test in the same
    process having picked it (they failed alone, or under another xdist distribution)."""
    from tutor.harness.device import select_device

    select_device("auto")


def student_state(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``'s drills/ and .flashtutor/: the student's work and record."""
    state = {}
    for part in ("drills", ".flashtutor"):
        for path in sorted((root / part).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@pytest.fixture(scope="session", autouse=True)
def the_clones_own_work_is_never_touched():
    """The tests run on temporary workspaces: the clone's drills/ and .flashtutor/
    (a student's work and progress) are byte-for-byte the same after the run."""
    before = student_state(REPO)
    yield
    after = student_state(REPO)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the test run changed the clone's own files: {changed}"
