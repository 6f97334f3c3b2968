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

import json
from collections.abc import Iterable, Mapping
from textwrap import dedent
from typing import Any

from vecenvs.bench.engine import DEFAULT_REFERENCE
from vecenvs.bench.sweep import SweepConfig
from vecenvs.envspec import CHECK_SECONDS

__all__ = [
    "FIGURES",
    "autotune_code",
    "history_code",
    "machine_code",
    "profile_code",
    "sweep_code",
    "training_code",
    "use_code",
]

#: The figure name -> the call drawing it from ``result`` and ``model``.
FIGURES = {
    "throughput": "figures.throughput_figure(result.measurements, model)",
    "speedup": "figures.speedup_figure(result.measurements, model)",
    "efficiency": "figures.efficiency_figure(result.measurements, model)",
    "model": None,
}


def sweep_code(settings: Mapping[str, Any], figure: str = "throughput") -> str:
    """The script that measures a sweep (``SweepConfig.to_dict()`` settings) and draws
    ``figure``: one of :data:`FIGURES` (``"model"`` prints the fitted model's table)."""
    if figure not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}, got {figure!r}")
    config = SweepConfig.from_dict(settings)
    imports = {"SweepConfig", "run_sweep"} | ({"figures"} if FIGURES[figure] else set())

    def spec(kind: str, name: Any, kwargs: Mapping[str, Any]) -> str:
        """``'pool'``, or ``Backend('pool', {'num_workers': 2})`` when it has arguments."""
        if not kwargs:
            return repr(name)
        imports.add(kind)
        return f"{kind}({name!r}, {dict(kwargs)!r})"

    envs = [spec("BenchEnv", env.env_id, env.kwargs) for env in config.env_specs()]
    backends = [  # run_sweep adds the reference by itself
        spec("Backend", backend.name, backend.kwargs)
        for backend in config.backend_specs()
        if backend.kwargs or backend.name != config.reference
    ]
    arguments = [
        f"envs=[{', '.join(envs)}]",
        f"num_envs={sorted(set(config.num_envs))!r}",
        f"backends=[{', '.join(backends)}]",
    ]
    if config.reference != DEFAULT_REFERENCE:
        arguments.append(f"reference={config.reference!r}")
    defaults = SweepConfig(envs=[], num_envs=[], backends=[]).timing
    arguments += [f"{k}={v!r}" for k, v in config.timing.items() if v != defaults[k]]
    if config.check_timeout != CHECK_SECONDS:  # an env slow to build: the limit it was given
        arguments.append(f"check_timeout={config.check_timeout!r}")
    lines = [
        f"from vecenvs.bench import {', '.join(sorted(imports))}",
        "",
        "config = SweepConfig(",
        *(f"    {argument}," for argument in arguments),
        ")",
        "result = run_sweep(config, progress=True)  # measures, with a progress bar",
        "model = result.model()  # the overhead model fitted to the measurements",
        f"{FIGURES[figure]}.show()" if FIGURES[figure] else "print(model.format_table())",
    ]
    return "\n".join(lines)


def profile_code(settings: Mapping[str, Any]) -> str:
    """The script that profiles one configuration (a ``ProfileConfig``'s fields) and shows
    the breakdown chart and where the flame graph is."""
    names = ("env_id", "num_envs", "backend", "backend_kwargs", "env_kwargs", "seconds", "rate")
    arguments = [
        f"    {k}={v!r}," for k, v in settings.items() if k in names and v not in ({}, None)
    ]
    if settings.get("check_timeout", CHECK_SECONDS) != CHECK_SECONDS:
        arguments.append(f"    check_timeout={settings['check_timeout']!r},")
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
    if settings.get("check_timeout", CHECK_SECONDS) != CHECK_SECONDS:
        arguments.append(f"check_timeout={settings['check_timeout']!r}")
    return dedent(f"""\
        from vecenvs.autotune import autotune
        from vecenvs.bench import figures

        result = autotune({", ".join(arguments)})
        print(result.format_table())
        print('best:', result.best.backend, result.best.kwargs)
        figures.autotune_figure(result.table).show()""")


def _literal(value: Any) -> str:
    """``value`` as Python source in one quote style: strings in double quotes, as the rest
    of the lines to paste (and black) write them; ``repr`` would mix in single quotes."""
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid Python string literal
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(map(_literal, value))
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def use_code(
    env: Mapping[str, Any],
    num_envs: int,
    backend: str,
    backend_kwargs: Mapping[str, Any],
    env_kwargs: Mapping[str, Any],
    *,
    sb3: bool = False,
) -> str:
    """The lines to paste to step ``num_envs`` copies of ``env`` (an
    :meth:`vecenvs.envspec.EnvName.to_dict`) as autotune recommends; with ``sb3``, wrapped for
    Stable-Baselines3 (built in SB3's own autoreset mode, so the adapter adds no round trip).

    Example:
        >>> env = {"text": "mycart:MyCart-v0", "kind": "module:id", "module": "mycart"}
        >>> kwargs = {"num_workers": 2, "start_method": "spawn"}
        >>> print(use_code(env, 16, "pool", kwargs, {"physics_steps": 1000}))
        from vecenvs import make_vec
        <BLANKLINE>
        envs = make_vec("mycart:MyCart-v0", 16, "pool", num_workers=2, start_method="spawn", env_kwargs={"physics_steps": 1000})
    """
    imports = ["from vecenvs import make_vec"]
    if env.get("kind") == "factory":  # a function: import it by name where it has one
        module, _, name = (
            str(env.get("text", "")).removeprefix("<factory ").rstrip(">").rpartition(".")
        )
        if name.isidentifier() and module == "__main__":  # defined in your script or notebook
            what = name
        elif name.isidentifier() and module:
            imports.insert(0, f"from {module} import {name}")
            what = name
        else:  # a lambda, a method, a partial: it has no name to import
            imports.append("from my_code import make_env  # your function that makes one env")
            what = "make_env"
    else:
        what = json.dumps(str(env["text"]))
    arguments = [what, str(num_envs), json.dumps(backend)]
    if sb3:
        arguments.append('autoreset_mode="SameStep"')
    arguments += [f"{key}={_literal(value)}" for key, value in backend_kwargs.items()]
    if env_kwargs:
        arguments.append(f"env_kwargs={_literal(dict(env_kwargs))}")
    call = f"make_vec({', '.join(arguments)})"
    if sb3:
        imports.append("from vecenvs.sb3 import to_sb3")
        return "\n".join([*imports, "", f"vec_env = to_sb3({call})"])
    return "\n".join([*imports, "", f"envs = {call}"])


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
            f"torch_threads={settings.get('torch_threads')!r}"
            + (
                f",\n                           env_kwargs={dict(settings['env_kwargs'])!r}"
                if settings.get("env_kwargs")
                else ""
            )
            + (
                f",\n                           check_timeout={settings['check_timeout']!r}"
                if settings.get("check_timeout", CHECK_SECONDS) != CHECK_SECONDS
                else ""
            )
            + ")",
            "for result in results:",
            "    m = result.measurement",
            "    print(f'{m.config.backend:12s} {m.median:8,.0f} env steps/s in training, '",
            "          f'{result.env_share:.0%} of it stepping envs')",
        ]
    )


def history_code(store_path: str, run_ids: Iterable[int]) -> str:
    """The script that reads runs back from a results store and exports them as CSV."""
    ids = list(run_ids)
    return dedent(f"""\
        from vecenvs.bench import ResultsStore
        from vecenvs.bench.engine import Measurement
        from vecenvs.bench.ratios import relate

        store = ResultsStore({str(store_path)!r})
        rows = store.measurements({ids!r})  # flat rows: pandas.DataFrame(rows) works
        # Each run's speed-ups and efficiencies, computed from its windows as the page does.
        runs = {{run: [Measurement.from_dict(r['data']) for r in rows if r['run_id'] == run]
                for run in {ids!r}}}
        measurements = {{run: relate(found) for run, found in runs.items()}}
        store.export_csv('results.csv', {ids!r})""")


def machine_code() -> str:
    """The script that prints what the machine page shows."""
    return dedent("""\
        from vecenvs.bench.machine import format_machine, machine_info
        from vecenvs.factory import available_backends
        from vecenvs.profile import check_attach

        print(format_machine(machine_info()))
        print('backends installed:', ', '.join(available_backends()))
        print(check_attach().message)""")
