"""Profiling: where does each process of a vector env spend its time?

py-spy samples the parent and every worker process, idle moments included, and each sample
is sorted into env compute, serialization, pipe & shared-memory I/O, waiting, bookkeeping or
other. Out come py-spy's speedscope file, collapsed stacks, a flame graph coloured by those
categories, and a per-process table.

One module per step:

- :mod:`vecenvs.profile.target`: the process that gets profiled (builds the vector env,
  steps it until told to stop, says which pid is which worker).
- :mod:`vecenvs.profile.runner`: :func:`profile` runs the target under py-spy and writes the
  files.
- :mod:`vecenvs.profile.pyspy`: finding py-spy, recognising its permission failures, and
  :func:`check_attach`, which says whether py-spy may attach to processes on this machine.
- :mod:`vecenvs.profile.stacks`: reading py-spy's speedscope and raw files, writing collapsed
  stacks.
- :mod:`vecenvs.profile.classify`: the rules that put a stack in a category.
- :mod:`vecenvs.profile.breakdown`: each process's share of samples per category, as a table
  and as a plotly chart.
- :mod:`vecenvs.profile.flamegraph`: the SVG flame graph.

Example:
    >>> from vecenvs.profile import ProfileConfig, profile
    >>> config = ProfileConfig("CartPole-v1", num_envs=8, backend="subproc", seconds=2)
    >>> result = profile(config)  # doctest: +SKIP
    >>> print(result.breakdown.format_table())  # doctest: +SKIP
    >>> result.svg_path  # doctest: +SKIP
    PosixPath('profiles/20250101-120000-subproc-CartPole-v1-N8/flamegraph.svg')

Or from a shell: ``python -m vecenvs profile --backend subproc --num-envs 8 --quick``.
"""

from vecenvs.profile.breakdown import (
    Breakdown,
    BreakdownRow,
    breakdown,
    breakdown_figure,
)
from vecenvs.profile.classify import (
    CATEGORIES,
    CATEGORY_COLORS,
    RULES,
    Rule,
    classify,
    explain,
)
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
