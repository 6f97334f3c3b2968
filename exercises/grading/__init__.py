"""The instructor's side of the grader, one idea per module (``exercises/grade.py`` runs them):

- :mod:`~.policy`: the points per check, the manual parts and the late penalty, read from
  ``exercises/policy.toml`` and checked against the checks that exist before any grading;
- :mod:`~.scores`: one student's grade, computed once from the checks' results, the manual
  scores and the submission time (every output below reads the same numbers);
- :mod:`~.materials`: what is graded by hand (question 6's explanation, the notebooks'
  ``MY_GUESS`` predictions), collected from the student's files inside the sandbox;
- :mod:`~.reports`: the feedback file per student, Gradescope's ``results.json``, the
  gradebook CSV and the instructor's sheet for the manual parts.

None of it is in the student release (``python -m exercises.release``).
"""
