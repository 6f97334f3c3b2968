"""The classroom exercises: the question files, their public checks and the sandbox that runs
students' code; in the instructor's copy also the solutions, the hidden checks, the grader and
the release builder.

See ``exercises/README.md`` (students) and ``exercises/INSTRUCTORS.md`` (the instructor's copy).
``python -m exercises.grade SUBMISSIONS`` grades a class; ``python -m exercises.release OUT``
builds the student release.
"""
