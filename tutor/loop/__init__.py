"""The save loop: a save becomes a verdict.

:mod:`~tutor.loop.watcher` sees the student save a drill (and debounces the
editor's burst of writes); :mod:`~tutor.loop.engine` decides what to check and
hands the job to :mod:`~tutor.loop.runner`, which keeps warm worker processes
and reads their answers; :mod:`~tutor.loop.worker` is the worker process itself
(``python -m tutor.loop.worker``), one check each, running the harness.  The
app, ``flashtutor watch`` and ``flashtutor check`` all drive this one loop.
"""
