"""Exercise 6 (open-ended): find the break-even N on your own machine, and explain it.

Questions 1 to 5 use numbers measured elsewhere. This one uses yours. Measure the loop
(gymnasium's ``SyncVectorEnv``, which ``vecenvs bench`` always measures as ``gym-sync``) and the
pool at a fixed number of workers, for a range of N, and find where the pool starts to win. From
the repository's root:

    python -m vecenvs bench --env CartPole-v1 --backend pool --workers 2 \\
        --num-envs 2 --num-envs 4 --num-envs 8 ... --num-envs 512 \\
        --json exercises/student/q6_sweep.json

Choose the env, the workers and the Ns yourself (at least 6 values of N, from the number of
workers up). If the pool never wins on CartPole on your machine, say so, and add a sweep of the
teaching env with a step cost (``--env vecenvs/Costly-v0 --env-kwarg step_seconds=1e-4``), where
it will. Measure on a quiet machine: close what you can, and look at the load that
``vecenvs bench`` prints.

Hand in this file, filled in, and the file ``--json`` wrote (``q6_sweep.json``, unchanged) beside
it in ``exercises/student``: the grader reads both from there.
The checks you run say whether your numbers agree with each other and with the JSON; whether
they are plausible is checked later, and your explanation is read by your instructor.

Fit the model with your own question 2: ``q2_overhead.py``, beside this file, is imported by
name. That works when the checks run this file (they put your folder on the path) and when you
run it yourself (``python exercises/student/q6_measure.py``). The model's numbers must come from
your functions: computed with ``vecenvs.bench.model`` they earn nothing.
"""

from q2_overhead import break_even_num_envs, fit_model  # noqa: F401  (your question 2's)

#: The CPUs the lab may use on your machine: ``vecenvs.available_cpus()`` (a whole number).
CPUS = None

#: The env of the sweep you report (e.g. "CartPole-v1"), and the arguments you gave it with
#: --env-kwarg (e.g. {"step_seconds": 1e-4}; {} for none).
ENV_ID = None
ENV_KWARGS = {}

#: The pool's --workers.
WORKERS = None

#: The command you ran.
COMMAND = None

#: One tuple per N, N increasing: (N, the loop's env steps/s, the pool's env steps/s), the
#: medians ``vecenvs bench`` printed (and wrote into q6_sweep.json).
SWEEP = []

#: The smallest N of your sweep at which the pool was at least as fast as the loop (None: at
#: none of them).
BREAK_EVEN_N = None

#: The overhead model fitted to your sweep (your ``fit_model`` from question 2 does it; times
#: in microseconds), and the break-even N it predicts with them (your
#: ``break_even_num_envs``, with WORKERS and CPUS).
T_ENV_US = None
T_OS_US = None
PREDICTED_BREAK_EVEN_N = None

#: 100 to 400 words, in your own words: what you measured and how; where the pool started to
#: win (or why it never did) and what limits it below and above that N; whether the model's
#: prediction agrees with your sweep, and why it does or does not.
EXPLANATION = """
"""
