"""The authors' tools: what the people who write drills use, never the student's check.

:mod:`tutor.authoring.student_kernels` reads the student-like kernels of each
drill (``solutions/NN_slug.mistakes.toml``) that the tests and ``flashtutor dev
check`` run through the real harness.
"""
