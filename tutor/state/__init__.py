"""The student's state: what is theirs, on their disk.

:mod:`~tutor.state.workspace` makes and resets a workspace (``flashtutor init``,
``reset``) from :mod:`tutor.pristine`'s shipped copies;
:mod:`~tutor.state.progress` records attempts and results under
``.flashtutor/``; :mod:`~tutor.state.hints` says which hints a student has
earned; :mod:`~tutor.state.targets` turns what the student typed on the command
line into drills.  Nothing here runs a check.
"""
