"""Fits only the public checks: numbers that agree with each other and with a JSON file written
by hand, that no machine measured."""

CPUS = 2
ENV_ID = "CartPole-v1"
ENV_KWARGS = {}
WORKERS = 2
COMMAND = (
    "python -m vecenvs bench --env CartPole-v1 --backend pool --workers 2 --json q6_sweep.json"
)
SWEEP = [
    (2, 10000.0, 18181.8),
    (4, 15000.0, 33333.3),
    (8, 30000.0, 57142.9),
    (16, 50000.0, 88888.9),
    (32, 80000.0, 123076.9),
    (64, 100000.0, 152381.0),
]
BREAK_EVEN_N = 2
T_ENV_US = 10.0
T_OS_US = 100.0
PREDICTED_BREAK_EVEN_N = 20
EXPLANATION = " ".join(["The pool wins from the start because it has two workers."] * 12)
