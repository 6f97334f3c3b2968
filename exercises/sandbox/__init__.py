"""Running a student's code where it can harm nothing, and judging it from outside.

The checks (``exercises/checks``) never import a student's file. Each question's code runs in
a process of its own, in a sandbox, and the checks ask it for answers::

    checks' process (pytest)                        student's process (sandboxed)
    ------------------------                        -----------------------------
    client.StudentProcess   --- request: "call q1_chunks.py's split_envs(10, 3)" -->  runner
    judges the answer here  <-- reply: plain data, e.g. [range(0, 4), ...] ---------  imports
    (writes the JUnit report                                                         the file,
     the grader counts)                                                              calls it

Modules, one idea each:

- :mod:`~exercises.sandbox.isolation`: which sandbox (bubblewrap, unshare, none) and what the
  student's process can see: a copy of its own files, nothing of the checks or solutions.
- :mod:`~exercises.sandbox.processes`: making sure every process it starts ends with it.
- :mod:`~exercises.sandbox.wire`: the plain data that crosses, and nothing else.
- :mod:`~exercises.sandbox.runner`: the student's side, which imports and calls.
- :mod:`~exercises.sandbox.toolkit`: helpers the checks build over there (env factories, a
  harness for a student's worker).
- :mod:`~exercises.sandbox.client`: the checks' side, with deadlines and messages for students.
"""
