"""Shared test set-up. Area-specific helpers live in tests/helpers_*.py."""

import os

# Never let a developer's GPU or workspace leak into the tests.
os.environ.setdefault("FLASHTUTOR_TEST", "1")
