"""The lab on machines other than ours: any CPU count, and a container's CPU quota.

K for N envs (:func:`vecenvs.pool.workers_for`) at 1 to 128 CPUs; the fake machines the tests
play (``tests/fake_machine``), checked in real child processes; where the count came from, as
``machine_info`` stores it and ``bench`` prints it; and ``bench``'s presets fitted to the CPUs
and to the N given. The notebooks at other CPU counts are in ``test_notebooks.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
from fake_machine import Machine, environment, in_container, quota_group, quota_skip_reason

import vecenvs.cli.bench
import vecenvs.pool
from vecenvs.autotune import candidates
from vecenvs.bench import BenchConfig
from vecenvs.bench.engine import validate_config
from vecenvs.bench.machine import format_machine, machine_info
from vecenvs.cli import build_parser
from vecenvs.pool import check_num_workers, workers_for

CPU_COUNTS = (1, 2, 3, 4, 8, 16, 64, 128)


def run_python(code: str, env: dict[str, str], prefix: list[str] | None = None) -> str:
    """Run ``code`` in a new interpreter with ``env`` added to ours; its stdout."""
    done = subprocess.run(
        [*(prefix or []), sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ------------------------------------------------------------------------------------------------
# K for N
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cpus", CPU_COUNTS)
@pytest.mark.parametrize("num_envs", (1, 2, 3, 4, 8, 16, 100, 256))
def test_k_is_one_per_cpu_never_above_n_and_says_when_n_capped_it(cpus, num_envs):
    for per_cpu in (1, 4):
        k = workers_for(num_envs, per_cpu=per_cpu, cpus=cpus)
        assert k.count == min(per_cpu * cpus, num_envs) and 1 <= k.count <= num_envs
        assert k.capped == (num_envs < per_cpu * cpus)
        text = str(k)
        assert text.startswith(f"K={k.count} at N={num_envs}")
        assert (f", not {per_cpu * cpus} " in text) == k.capped, text
        assert f"per CPU of {cpus}" in text


def test_the_pools_default_k_is_the_same(monkeypatch):
    for cpus in CPU_COUNTS:
        monkeypatch.setattr(vecenvs.pool, "available_cpus", lambda cpus=cpus: cpus)
        for num_envs in (1, 4, 64, 256):
            assert check_num_workers(None, num_envs) == workers_for(num_envs).count
            assert workers_for(num_envs).count == min(cpus, num_envs)


@pytest.mark.parametrize("bad", (0, -1, 1.5, True, "8"))
def test_workers_for_refuses_what_is_not_a_count(bad):
    with pytest.raises((TypeError, ValueError), match="num_envs is"):
        workers_for(bad)
    with pytest.raises((TypeError, ValueError), match="per_cpu is"):
        workers_for(8, per_cpu=bad)


@pytest.mark.parametrize("cpus", CPU_COUNTS)
def test_autotunes_candidates_fit_any_machine_and_any_n(cpus):
    """Each candidate is a configuration the engine accepts (K and batches at most N), the pool
    never has more workers than CPUs, and the first pool is one worker per CPU, capped at N."""
    for num_envs in (1, 2, 3, 4, 8, 128, 1024):
        found = candidates(num_envs, cpus=cpus)
        labels = [candidate.label for candidate in found]
        assert labels[0] == "multi" and len(set(labels)) == len(labels), labels
        for candidate in found:
            validate_config(BenchConfig("CartPole-v1", num_envs, candidate.name, candidate.kwargs))
            assert candidate.kwargs.get("num_workers", 1) <= min(cpus, num_envs), candidate.label
        pools = [c.kwargs["num_workers"] for c in found if c.name == "pool"]
        assert pools[:1] == ([workers_for(num_envs, cpus=cpus).count] if pools else [])


# ------------------------------------------------------------------------------------------------
# The fake machines themselves
# ------------------------------------------------------------------------------------------------

#: Prints what a process and its children (forked, spawned) see of the CPUs.
SEEN = """
    import os
    import multiprocess
    import psutil
    from vecenvs.cpus import cpu_count


    def count(queue):
        import os  # a spawned child runs this function alone: it brings its own import

        queue.put(os.cpu_count())


    if __name__ == "__main__":
        seen = [os.cpu_count(), len(os.sched_getaffinity(0)), psutil.cpu_count()]
        for method in ("fork", "spawn"):
            context = multiprocess.get_context(method)
            queue = context.Queue()
            child = context.Process(target=count, args=(queue,))
            child.start()
            seen.append(queue.get(timeout=60))
            child.join(60)
        print(seen, cpu_count().count)
"""


@pytest.mark.parametrize("cpus", (1, 64))
def test_a_faked_cpu_count_is_seen_by_the_process_and_its_children(cpus):
    seen = run_python(SEEN, environment(cpus))
    assert seen == f"{[cpus] * 5} {cpus}"


def test_the_fake_refuses_a_count_that_is_not_one():
    done = subprocess.run(
        [sys.executable, "-c", "pass"],
        env={**environment(1), "VECENVS_FAKE_CPUS": "many"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "VECENVS_FAKE_CPUS is 'many'" in done.stderr


#: What a process in a container says of its CPUs: the count, and the machine_info a run stores.
IN_CONTAINER = """
    import json
    from vecenvs.bench.machine import format_machine, machine_info
    from vecenvs.cpus import cpu_count

    info = machine_info()
    print(json.dumps([str(cpu_count()), info, format_machine(info)]))
"""


def test_a_faked_container_counts_its_quota_and_says_so():
    """A real cgroup v1 quota of 4 CPUs, in a cgroup namespace, on a host faked at 64 CPUs."""
    reason = quota_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    machine = Machine(64, quota=4)
    with quota_group(machine.quota) as group:
        seen = run_python(IN_CONTAINER, environment(machine.cpus), in_container(group, []))
    sentence, info, summary = json.loads(seen)
    assert sentence == "4 CPUs: cgroup quota 400000/100000 on a 64-CPU host"
    assert info["usable_cpus"] == 4 and info["logical_cpus"] == 64
    assert info["cpus_from"] == sentence and info["affinity_cpus"] == 64
    assert info["cpu_quota"] == {"quota": 400000, "period": 100000}
    assert "64 logical CPUs" in summary
    assert "4 CPUs usable here: cgroup quota 400000/100000 on a 64-CPU host" in summary


# ------------------------------------------------------------------------------------------------
# Where the count came from, stored and printed
# ------------------------------------------------------------------------------------------------


def test_machine_info_stores_where_the_count_came_from_and_old_runs_still_read():
    info = machine_info()
    assert info["cpus_from"].startswith(f"{info['usable_cpus']} CPU")
    assert f"{info['usable_cpus']} CPU" in format_machine(info)
    assert "usable here: " in format_machine(info)
    old = {"cpu_model": "Old CPU", "logical_cpus": 8, "usable_cpus": 4, "physical_cores": 4}
    assert format_machine(old) == "Old CPU: 8 logical CPUs (4 usable here, 4 physical cores)"


def test_bench_prints_where_its_cpu_count_came_from_and_when_n_capped_k():
    code = """
        import sys
        from vecenvs.cli import main

        sys.exit(main(["bench", "--env", "CartPole-v1", "--num-envs", "2", "--backend", "pool",
                       "--seconds", "0.02", "--warmup", "0", "--repeats", "1", "--no-store"]))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **environment(64)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("CPUs: 64 CPUs: all of the host's"), done.stderr
    note = (
        "note: pool, not told K: K=2 at N=2, not 64 (one per CPU of 64): each worker needs at "
        "least one env."
    )
    assert note in done.stdout, done.stdout


# ------------------------------------------------------------------------------------------------
# bench's presets on any machine, at any N
# ------------------------------------------------------------------------------------------------


def preset(monkeypatch, cpus: int, *argv: str):
    """``bench``'s sweep and notes for ``argv`` on a machine of ``cpus`` CPUs (nothing run)."""
    monkeypatch.setattr(vecenvs.cli.bench, "available_cpus", lambda: cpus)
    args = build_parser().parse_args(["bench", *argv])
    config, notes = vecenvs.cli.bench._sweep_config(args)
    pools = sorted(
        b.kwargs.get("num_workers", 0) for b in config.backend_specs() if b.name == "pool"
    )
    return config, notes, pools


def test_a_presets_k_above_the_smallest_n_is_left_out_with_a_note(monkeypatch):
    config, notes, pools = preset(monkeypatch, 16, "--preset", "core16", "--num-envs", "8")
    assert pools == [4, 8] and sorted(config.num_envs) == [8]
    assert notes == [
        "--preset core16: K=16 left out: the smallest N is 8, and each worker needs at least "
        "one env"
    ]
    _, notes, pools = preset(monkeypatch, 16, "--preset", "core16", "--num-envs", "2")
    assert pools == [0]  # the pool's own K: min(CPUs, N)
    assert "K=4, K=8, K=16 left out" in notes[0] and "takes its own K" in notes[0]


def test_a_preset_for_more_cpus_says_it_oversubscribes_this_machine(monkeypatch):
    config, notes, pools = preset(monkeypatch, 2, "--preset", "core16")
    assert pools == [4, 8, 16] and min(config.num_envs) >= 16
    assert notes == [
        "--preset core16: K=4, K=8, K=16 are more workers than the 2 CPUs this process may "
        "use: measured as given, the machine oversubscribed"
    ]
    _, notes, _ = preset(monkeypatch, 16, "--preset", "core16")
    assert notes == []


@pytest.mark.parametrize("cpus, added", [(1, None), (2, None), (16, None), (64, 128), (128, 256)])
def test_the_seeds_preset_keeps_some_n_beyond_the_cpus(monkeypatch, cpus, added):
    config, notes, _ = preset(monkeypatch, cpus, "--preset", "seeds")
    assert max(config.num_envs) > cpus
    assert sorted(config.num_envs) == sorted([1, 2, 4, 16, 64] + ([added] if added else []))
    assert bool(notes) == (added is not None)
    _, notes, _ = preset(monkeypatch, cpus, "--preset", "seeds", "--num-envs", "8")
    assert notes == []  # the N given are the N measured


@pytest.mark.parametrize("name", ["core2", "core16", "seeds"])
def test_a_preset_without_mujoco_says_which_env_it_leaves_out_and_why(monkeypatch, name):
    """``--preset core2`` measured 3 points instead of 4 with only "measuring 3 point(s)": the
    note names the env left out, the reason and the install that puts it back."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        vecenvs.cli.bench.importlib.util,
        "find_spec",
        lambda module, *rest: None if module == "mujoco" else real(module, *rest),
    )
    config, notes, _ = preset(monkeypatch, 2, "--preset", name)
    assert "HumanoidStandup-v5" not in {spec.env_id for spec in config.env_specs()}
    note = next(n for n in notes if "HumanoidStandup" in n)
    assert note.startswith(f"--preset {name}: HumanoidStandup-v5 left out, MuJoCo is not installed")
    assert "'.[mujoco]'" in note
    monkeypatch.undo()
    _, notes, _ = preset(monkeypatch, 2, "--preset", name)
    assert not any("HumanoidStandup" in n for n in notes)
