"""The authors' tools: what the people who write drills use, never the student's check.

:mod:`tutor.authoring.devcheck` is ``flashtutor dev check`` (every drill's
solution and student-like kernels through the real harness);
:mod:`tutor.authoring.devnew` is ``flashtutor dev new`` (a new drill's files).
:mod:`tutor.authoring.student_kernels` reads the student-like kernels of each
drill (``solutions/NN_slug.mistakes.toml``) that the tests and ``flashtutor dev
check`` run through the real harness.
"""
