"""Shared test set-up. Area-specific helpers live in tests/helpers_*.py."""

import hashlib
import os
from pathlib import Path

import pytest

# Never let a developer's GPU or workspace leak into the tests.
os.environ.setdefault("FLASHTUTOR_TEST", "1")

REPO = Path(__file__).resolve().parent.parent


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
