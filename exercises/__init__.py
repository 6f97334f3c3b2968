"""The classroom exercises: student files, reference solutions, pytest checks and a grader.

See ``exercises/README.md``. ``python -m exercises.grade SUBMISSIONS`` grades a class.
"""
