"""On Triton's interpreter, an autotuned kernel runs one of its configs instead of failing.

``@triton.autotune`` with more than one config times every config on the first launch
of each key, through the GPU driver; under ``TRITON_INTERPRET=1`` there is none, and the
launch raises ``RuntimeError: 0 active drivers ([]). There should only be one.`` at the
student's ``kernel[grid](...)`` line, so a correct kernel written the way Triton's own
tutorials write it could not be checked on a CPU at all.

While interpreting, :func:`install` makes such a launch take, untimed, the first config
that the autotuner's own pruning keeps (its ``prune_configs_by`` hooks included), as
Triton itself does when pruning leaves one config.  Timing configs would mean nothing
here anyway: the interpreter's times are relative only.  So on a CPU the verdict is the
first config's; on a GPU the autotuner times them all and the performance phase checks
the chosen one against the reference (``docs/LOOP.md``).  Off with
``FLASHTUTOR_AUTOTUNE_FIRST=0``.
"""

from __future__ import annotations

import os
from typing import Any

DISABLE_ENV = "FLASHTUTOR_AUTOTUNE_FIRST"  # "0": Triton's autotuner as shipped (it fails on the interpreter)


def install() -> bool:
    """Patch Triton's ``Autotuner.run`` (idempotent); False where disabled or where this
    Triton has no autotuner with the names this relies on."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return False
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    if not all(hasattr(Autotuner, name) for name in ("run", "prune_configs")):
        return False
    if getattr(Autotuner.run, "_flashtutor_first", False):
        return True
    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = getattr(self, "configs", None)
        if not isinstance(configs, list) or len(configs) < 2:
            return original(self, *args, **kwargs)
        self.nargs = dict(zip(self.arg_names, args, strict=False))  # what prune_configs' hooks read
        try:
            kept = list(self.prune_configs(kwargs)) or configs
        except RuntimeError:  # a pruning hook that needs a GPU's driver: every config stays a candidate
            kept = configs
        self.configs = kept[:1]  # one config: Triton's autotuner launches it without timing
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = configs

    run._flashtutor_first = True  # type: ignore[attr-defined]
    Autotuner.run = run
    return True
