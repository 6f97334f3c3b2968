"""The classroom exercises: the question files, their public checks and the sandbox that runs
students' code (``exercises/README.md`` says how to work on them). Whoever teaches the course
has more here, and a guide of its own beside this file.
"""
