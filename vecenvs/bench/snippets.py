"""The few lines of Python that give the same numbers as a dashboard chart.

Every chart in the dashboard sits beside the code that produces it in a script or a notebook,
written out from the very settings the chart was measured with. A user who likes a chart can
copy the code and keep going without the dashboard, and a learner sees that the dashboard is
nothing but these functions. The tests run the snippets, so they stay true.

Example:
    >>> from vecenvs.bench import SweepConfig
    >>> print(sweep_code(SweepConfig(["CartPole-v1"], [4], ["pool"]).to_dict(), "throughput"))
    ... # doctest: +ELLIPSIS
    from vecenvs.bench import SweepConfig, figures, run_sweep
    ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vecenvs.bench.engine import DEFAULT_REFERENCE
from vecenvs.bench.sweep import SweepConfig

__all__ = [
    "FIGURES",
    "autotune_code",
    "history_code",
    "machine_code",
    "profile_code",
    "sweep_code",
    "training_code",
]

#: The figure name -> the call drawing it from ``result`` and ``model``.
FIGURES = {
    "throughput": "figures.throughput_figure(result.measurements, model)",
    "speedup": "figures.speedup_figure(result.measurements, model)",
    "efficiency": "figures.efficiency_figure(result.measurements, model)",
    "model": None,
}

_TIMING = ("warmup_seconds", "measure_seconds", "repeats", "seed")


def sweep_code(settings: Mapping[str, Any], figure: str = "throughput") -> str:
    """The script that measures a sweep (``SweepConfig.to_dict()`` settings) and draws
    ``figure``: one of :data:`FIGURES` (``"model"`` prints the fitted model's table)."""
    if figure not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}, got {figure!r}")
    config = SweepConfig.from_dict(settings)
    defaults = SweepConfig(envs=[], num_envs=[], backends=[])
    imports = ["SweepConfig", "run_sweep"]
    envs = []
    for env in config.env_specs():
        if env.kwargs:
            envs.append(f"BenchEnv({env.env_id!r}, {dict(env.kwargs)!r})")
            imports.append("BenchEnv")
        else:
            envs.append(repr(env.env_id))
    backends = []
    for backend in config.backend_specs():
        if backend.name == config.reference and not backend.kwargs:
            continue  # run_sweep adds the reference by itself
        if backend.kwargs:
            backends.append(f"Backend({backend.name!r}, {dict(backend.kwargs)!r})")
            imports.append("Backend")
        else:
            backends.append(repr(backend.name))
    if FIGURES[figure] is not None:
        imports.append("figures")
    arguments = [
        f"envs=[{', '.join(envs)}]",
        f"num_envs={sorted(set(config.num_envs))!r}",
        f"backends=[{', '.join(backends)}]",
    ]
    if config.reference != DEFAULT_REFERENCE:
        arguments.append(f"reference={config.reference!r}")
    arguments += [
        f"{name}={getattr(config, name)!r}"
        for name in _TIMING
        if getattr(config, name) != getattr(defaults, name)
    ]
    lines = [
        f"from vecenvs.bench import {', '.join(sorted(set(imports)))}",
        "",
        "config = SweepConfig(",
        *(f"    {argument}," for argument in arguments),
        ")",
        "result = run_sweep(config, progress=True)  # measures, with a progress bar",
        "model = result.model()  # the overhead model fitted to the measurements",
    ]
    if FIGURES[figure] is None:
        lines.append("print(model.format_table())")
    else:
        lines.append(f"{FIGURES[figure]}.show()")
    return "\n".join(lines)


def profile_code(settings: Mapping[str, Any]) -> str:
    """The script that profiles one configuration (a ``ProfileConfig``'s fields) and shows
    the breakdown chart and where the flame graph is."""
    shown = {
        key: value
        for key, value in settings.items()
        if key
        in ("env_id", "num_envs", "backend", "backend_kwargs", "env_kwargs", "seconds", "rate")
        and value not in ({}, None)
    }
    arguments = [f"    {key}={value!r}," for key, value in shown.items()]
    return "\n".join(
        [
            "from vecenvs.profile import ProfileConfig, breakdown_figure, profile",
            "",
            "result = profile(ProfileConfig(",
            *arguments,
            "))",
            "print(result.breakdown.format_table())",
            "breakdown_figure(result.breakdown).show()",
            "print('flame graph:', result.svg_path)  # open it in a browser",
        ]
    )


def autotune_code(settings: Mapping[str, Any]) -> str:
    """The script that runs the same autotune search and prints its table."""
    arguments = [
        repr(settings["env_id"]),
        f"num_envs={settings['num_envs']!r}",
        f"budget_seconds={settings['budget_seconds']!r}",
    ]
    if settings.get("env_kwargs"):
        arguments.append(f"env_kwargs={dict(settings['env_kwargs'])!r}")
    return "\n".join(
        [
            "from vecenvs.autotune import autotune",
            "from vecenvs.bench import figures",
            "",
            f"result = autotune({', '.join(arguments)})",
            "print(result.format_table())",
            "print('best:', result.best.backend, result.best.kwargs)",
            "figures.autotune_figure(result.table).show()",
        ]
    )


def training_code(settings: Mapping[str, Any]) -> str:
    """The script that measures PPO's training throughput on the same backends."""
    return "\n".join(
        [
            "from vecenvs.bench.training import compare_training",
            "",
            f"results = compare_training({settings['env_id']!r}, {settings['num_envs']!r}, "
            f"{list(settings['backends'])!r},",
            f"                           timesteps={settings['timesteps']!r}, "
            f"repeats={settings['repeats']!r}, "
            f"torch_threads={settings.get('torch_threads')!r})",
            "for result in results:",
            "    m = result.measurement",
            "    print(f'{m.config.backend:12s} {m.median:8,.0f} env steps/s in training, '",
            "          f'{result.env_share:.0%} of it stepping envs')",
        ]
    )


def history_code(store_path: str, run_ids: Iterable[int]) -> str:
    """The script that reads runs back from a results store and exports them as CSV."""
    ids = list(run_ids)
    return "\n".join(
        [
            "from vecenvs.bench import ResultsStore",
            "from vecenvs.bench.engine import Measurement",
            "",
            f"store = ResultsStore({str(store_path)!r})",
            f"rows = store.measurements({ids!r})  # flat rows: pandas.DataFrame(rows) works",
            "measurements = [Measurement.from_dict(row['data']) for row in rows]",
            f"store.export_csv('results.csv', {ids!r})",
        ]
    )


def machine_code() -> str:
    """The script that prints what the machine page shows."""
    return "\n".join(
        [
            "from vecenvs.bench.machine import format_machine, machine_info",
            "from vecenvs.factory import available_backends",
            "from vecenvs.profile import check_attach",
            "",
            "print(format_machine(machine_info()))",
            "print('backends installed:', ', '.join(available_backends()))",
            "print(check_attach().message)",
        ]
    )
