"""flashtutor: FlashAttention drills in Triton, checked on every save.

The package is the core (catalog, harness, runner, watcher, progress, hints,
quiz) plus a thin Textual layer in :mod:`tutor.app`.  Nothing outside
``tutor.app`` imports Textual; ``.importlinter`` enforces it.
"""

__version__ = "0.1.0"
