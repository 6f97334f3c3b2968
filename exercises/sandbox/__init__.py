"""Running a student's code where it can harm nothing, and judging it from outside.

The checks never import a student's file: each question's code runs in a sandboxed process and
the checks ask it for answers, which come back as plain data. One idea per module:
:mod:`~.isolation` (which sandbox, and what the student's process sees), :mod:`~.processes`
(every process it starts ends with it), :mod:`~.network` (no network where no namespace
turns it off), :mod:`~.wire` (only plain data crosses), :mod:`~.runner` (the student's side,
which imports and calls), :mod:`~.tracing` (which of the course's own functions the student's
code calls), :mod:`~.toolkit` (what the checks build over there) and :mod:`~.client` (the
checks' side, with deadlines, messages written for students, and what each answer may call).
"""
