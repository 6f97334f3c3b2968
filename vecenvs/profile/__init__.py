"""Profiling: where does each process of a vector env spend its time?

py-spy samples the parent and every worker, idle moments included (:mod:`.runner` runs
:mod:`.target` under it, :mod:`.pyspy` finds it and checks it may attach); :mod:`.classify` sorts
each sample into env compute, serialization, pipe & shm I/O, waiting, bookkeeping or other, and
out come py-spy's speedscope file, collapsed stacks (:mod:`.stacks`), a flame graph coloured by
category (:mod:`.flamegraph`) and a per-process table and chart (:mod:`.breakdown`)::

    result = profile(ProfileConfig("CartPole-v1", num_envs=8, backend="subproc", seconds=2))
    print(result.breakdown.format_table())  # and result.svg_path: the flame graph

Or from a shell: ``python -m vecenvs profile --backend subproc --num-envs 8 --quick``.
"""

from vecenvs.profile.breakdown import Breakdown, BreakdownRow, breakdown, breakdown_figure
from vecenvs.profile.classify import CATEGORIES, CATEGORY_COLORS, RULES, Rule, classify, explain
from vecenvs.profile.flamegraph import flamegraph_svg, write_flamegraph
from vecenvs.profile.pyspy import (
    PY_SPY_ENV_VAR,
    AttachCheck,
    ProfilerError,
    PySpyNotFoundError,
    PySpyPermissionError,
    check_attach,
    find_py_spy,
)
from vecenvs.profile.runner import (
    Profile,
    ProfileConfig,
    default_output_dir,
    profile,
    validate_profile,
)
from vecenvs.profile.stacks import (
    Frame,
    StackSample,
    read_collapsed,
    read_samples,
    read_speedscope,
    write_collapsed,
)

__all__ = [
    "CATEGORIES",
    "CATEGORY_COLORS",
    "PY_SPY_ENV_VAR",
    "RULES",
    "AttachCheck",
    "Breakdown",
    "BreakdownRow",
    "Frame",
    "Profile",
    "ProfileConfig",
    "ProfilerError",
    "PySpyNotFoundError",
    "PySpyPermissionError",
    "Rule",
    "StackSample",
    "breakdown",
    "breakdown_figure",
    "check_attach",
    "classify",
    "default_output_dir",
    "explain",
    "find_py_spy",
    "flamegraph_svg",
    "profile",
    "read_collapsed",
    "read_samples",
    "read_speedscope",
    "validate_profile",
    "write_collapsed",
    "write_flamegraph",
]
