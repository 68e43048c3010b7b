"""flashtutor: FlashAttention drills in Triton, checked on every save.

The folders, top floor first (``.importlinter``'s ``floors`` contract keeps the
arrows pointing down, and only :mod:`tutor.app` imports Textual):

* :mod:`tutor.app` - the Textual app (screens, widgets).
* :mod:`tutor.cli` - ``flashtutor`` and its commands.
* :mod:`tutor.authoring` - the drill authors' tools (``dev check``, ``dev new``,
  the student-like kernels).
* :mod:`tutor.loop` - the save loop: watcher, engine, runner, worker.
* :mod:`tutor.quiz` - the derivation quizzes.
* :mod:`tutor.state` - the student's state: workspace, progress, hints, targets.
* :mod:`tutor.harness` - the check itself, run in the worker; one module per
  problem under :mod:`tutor.harness.problems`.

Left at the top, because more than one folder uses them or the outside world
names them: ``standalone`` (``python drills/NN_slug.py`` imports it, so its
path is part of every shipped drill), ``doctor`` (``flashtutor doctor``: reads
every floor), ``report`` and ``roofline`` (a result and its roofline in words,
for the CLI and the app), ``catalog`` (the drills), ``pristine`` (the shipped
drills' blob ids: the catalog, the harness and the workspace read them),
``paths``, ``codec`` and ``links``.
"""

__version__ = "0.1.0"
