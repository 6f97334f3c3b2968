"""RayVecEnv: the contract every backend keeps, its failures, and who starts and stops Ray.

Starting Ray takes 5-15 s on a small machine, so one local Ray is started for the whole module
(``ray_session``) and every RayVecEnv here uses it: a RayVecEnv never shuts down a Ray it did
not start. Ray's own processes (GCS server, raylet, agents, idle workers) exist before each test
starts, so ``no_leftover_processes`` checks exactly what a RayVecEnv adds: its actors. One test
runs in a fresh interpreter without that fixture, to check the other case: a RayVecEnv that
started Ray shuts it down when it closes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import assert_same
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import vecenvs
from vecenvs.cpus import available_cpus
from vecenvs.envs.faulty import faulty_env_fns
from vecenvs.errors import (
    ClosedEnvironmentError,
    EnvCrashedError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.factory import env_fns_for
from vecenvs.testing import check_vector_env

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'vecenvs[ray]'")

from vecenvs.ray_env import RaySession, RayVecEnv, import_ray

pytestmark = pytest.mark.timeout(300)  # the conformance checker builds ~20 RayVecEnvs


def ray_backend(env_fns, **kwargs):
    """The backend under test, in the shape the conformance checker takes."""
    return RayVecEnv(env_fns, **{"num_workers": 2, "timeout": 30.0, **kwargs})


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray for the module, started the way RayVecEnv would start it.

    Tried up to three times: on a loaded machine (make test runs other files beside this one) a
    raylet can take longer than Ray's own start-up limit, and ``ray.init`` then raises "timed
    out during startup" (tests/test_ray_cluster.py retries its nodes the same way).
    """
    assert not ray.is_initialized(), "another test left Ray running"
    for attempt in range(3):
        try:
            ray.init(**RaySession.init_arguments(None, None))
            break
        except Exception as failure:
            ray.shutdown()
            if "timed out during startup" not in str(failure) or attempt == 2:
                raise
    yield
    ray.shutdown()


# ------------------------------------------------------------------------------------------------
# Starting and stopping Ray. First, before the module's Ray is up.
# ------------------------------------------------------------------------------------------------


def test_a_ray_we_started_is_shut_down_when_the_last_env_closes():
    # In a fresh interpreter: Ray's processes are the children of the process that starts it.
    script = textwrap.dedent("""
        import gymnasium as gym, psutil, ray
        from vecenvs.ray_env import RayVecEnv

        def children():
            return [p for p in psutil.Process().children(recursive=True) if p.status() != "zombie"]

        first = RayVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=2)
        second = RayVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=1)  # shares that Ray
        first.reset(seed=0)
        print("started", ray.is_initialized(), len(children()) > 0)
        first.close()
        print("one closed", ray.is_initialized(), second.reset(seed=0)[0].shape)
        second.close()
        psutil.wait_procs(children(), timeout=10)
        print("all closed", ray.is_initialized(), children())
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "started True True",
        "one closed True (2, 4)",
        "all closed False []",
    ]


def test_init_arguments_start_a_small_quiet_local_ray_or_join_a_cluster(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = RaySession.init_arguments(None, None)
    assert local["include_dashboard"] is False and local["log_to_driver"] is False
    # Our own Ray, even where another program runs one on this machine (ray.init would join it).
    assert local["address"] == "local"
    assert (
        local["num_cpus"] == available_cpus()  # the affinity mask and a container's quota
        and local["logging_level"] == logging.WARNING
    )
    cluster = RaySession.init_arguments("ray://head:10001", {"log_to_driver": True})
    assert cluster["address"] == "ray://head:10001" and cluster["log_to_driver"] is True
    assert "num_cpus" not in cluster  # a cluster knows its own CPUs; ray.init refuses num_cpus then
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")  # ray.init reads it: join that cluster
    joined = RaySession.init_arguments(None, None)
    assert "address" not in joined and "num_cpus" not in joined


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(ImportError, match=r"make peers \(or pip install 'vecenvs\[ray\]'"):
        import_ray()
    with pytest.raises(ImportError, match=r"pip install 'vecenvs\[ray\]'"):
        RayVecEnv(env_fns_for("CartPole-v1", 2))


# ------------------------------------------------------------------------------------------------
# The contract, on the module's Ray
# ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_the_conformance_checker_passes():
    # API and spaces, step-by-step equality with SyncVectorEnv in both autoreset modes, close,
    # and env errors in make/reset/step/call. One of the checker's four envs, as each check
    # starts new actors (~2 s each here; 80 s for two envs): the nested one (Dict observations,
    # Box actions, truncated every 25 steps). CartPole, discrete and terminating, is stepped
    # against SyncVectorEnv on two nodes in tests/test_ray_cluster.py.
    report = check_vector_env(
        ray_backend, env_ids=("vecenvs/DictObs-v0",), require_context_manager=True
    )
    assert report and all(status.startswith("ok") for _, status in report)


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_uneven_chunks_step_async_reset_masks_and_attributes():
    env_fns = env_fns_for("vecenvs/DictObs-v0", 5)  # reports reset infos: they must line up too
    reference = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    with ray_backend(env_fns, num_workers=3, autoreset_mode="SameStep") as envs:
        assert envs.chunks == [range(1), range(1, 3), range(3, 5)]  # the larger chunks last
        assert (
            len({pid for _, pid in envs.worker_locations}) == 3
            and os.getpid() not in dict(envs.worker_locations).values()
        )
        assert_same(envs.reset(seed=0), reference.reset(seed=0))
        envs.action_space.seed(2)
        for step in range(40):
            actions = envs.action_space.sample()
            envs.step_async(actions)
            assert_same(envs.step_wait(), reference.step(actions), f"step {step}")
        mask = np.array([True, False, False, False, True])  # the middle actor is not asked
        assert_same(
            envs.reset(seed=[7, 8, 9, 10, 11], options={"reset_mask": mask.copy()}),
            reference.reset(seed=[7, 8, 9, 10, 11], options={"reset_mask": mask.copy()}),
        )
        envs.set_attr("probe", [10, 11, 12, 13, 14])
        assert envs.get_attr("probe") == (10, 11, 12, 13, 14)
        assert envs.call("probe") == (10, 11, 12, 13, 14)
        with pytest.raises(ValueError, match="expected 5 values"):
            envs.set_attr("probe", [1, 2])
    reference.close()


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_make_vec_builds_it():
    with vecenvs.make_vec("CartPole-v1", 4, backend="ray", num_workers=2) as envs:
        assert isinstance(envs, RayVecEnv) and envs.num_workers == 2
        reference = SyncVectorEnv(env_fns_for("CartPole-v1", 4))
        assert_same(envs.reset(seed=1), reference.reset(seed=1))
        for step in range(30):
            actions = np.array([step % 2, 1, 0, 1])
            assert_same(envs.step(actions), reference.step(actions), f"step {step}")
    assert ray.is_initialized()  # not ours to shut down: the fixture started it


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_each_actor_sets_its_envs_threads():
    env_fns = env_fns_for("vecenvs/Costly-v0", 2, step_seconds=0)
    for kwargs, expected in (({}, 1), ({"worker_threads": 2}, 2)):  # (each actor: ~3 s here)
        with ray_backend(env_fns, **kwargs) as envs:
            envs.reset(seed=0)
            assert [limits["blas"] for limits in envs.call("thread_limits")] == [expected] * 2
    with pytest.raises(ValueError, match="worker_threads is 0"):
        RayVecEnv(env_fns, worker_threads=0)
    with pytest.raises(ValueError, match="RayVecEnv sends everything pickled over pipes"):
        RayVecEnv(env_fns, shared_memory=True)


# ------------------------------------------------------------------------------------------------
# Failures: an env's exception, a dead actor, a hung env
# ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_an_env_exception_reaches_the_caller_with_its_index_and_traceback():
    envs = ray_backend(faulty_env_fns(4, 3, fail_on="step", at=2, how="raise"))
    envs.reset(seed=0)
    envs.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(EnvCrashedError) as info:
        envs.step(np.zeros(4, dtype=np.int64))
    error = info.value
    assert error.env_index == 3 and error.command == "step" and error.error_type == "RuntimeError"
    assert "FaultyEnv: deliberate failure in step #2" in error.remote_traceback
    assert "faulty.py" in error.remote_traceback  # the env's own frames, from the actor's process
    assert str(error).startswith(
        "env 3 raised RuntimeError during step"
    ) and "has been closed" in str(error)
    assert envs.closed  # its envs are out of step: it closed itself
    with pytest.raises(ClosedEnvironmentError):
        envs.step(np.zeros(4, dtype=np.int64))


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_an_env_exception_in_call_leaves_the_env_usable():
    with ray_backend(
        faulty_env_fns(3, 2, fail_on="call", at=1, how="raise"), num_workers=1
    ) as envs:
        envs.reset(seed=0)
        with pytest.raises(EnvCrashedError) as info:
            envs.call("ping", 1)
        assert (
            info.value.env_index == 2
            and "deliberate failure in call #1" in info.value.remote_traceback
        )
        assert envs.call("ping", 5) == (5, 5, 5)
        functions = envs.call("ping", lambda: 42)  # Ray's cloudpickle carries a lambda both ways
        assert [function() for function in functions] == [42] * 3
        envs.step(np.zeros(3, dtype=np.int64))


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
@pytest.mark.parametrize("how", ["killed from outside", "the env kills its own process"])
def test_a_dead_actor_gives_worker_died_error(how):
    if how == "killed from outside":
        envs = ray_backend(env_fns_for("CartPole-v1", 4))
        envs.reset(seed=0)
        _, pid = envs.worker_locations[1]
        os.kill(pid, signal.SIGKILL)
    else:
        envs = ray_backend(faulty_env_fns(4, 2, fail_on="step", at=1, how="kill"))
        envs.reset(seed=0)
    with pytest.raises(WorkerDiedError) as info:
        envs.step(np.zeros(4, dtype=np.int64))
    assert info.value.worker_index == 1 and info.value.env_indices == [2, 3]
    assert "worker 1 (envs 2-3) died during step" in str(info.value)
    assert isinstance(info.value.__cause__, ray.exceptions.RayActorError)  # Ray's own account
    assert envs.closed


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_a_hung_env_gives_worker_timeout_error_and_its_actor_is_killed():
    envs = ray_backend(
        faulty_env_fns(3, 0, fail_on="step", at=1, how="hang"), num_workers=1, timeout=2.0
    )
    envs.reset(seed=0)
    with pytest.raises(WorkerTimeoutError) as info:
        envs.step(np.zeros(3, dtype=np.int64))
    assert info.value.worker_indices == [0] and info.value.env_indices == [0, 1, 2]
    assert envs.closed and envs.actors == []


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_bad_arguments_are_refused_before_any_actor_starts():
    for bad, error, message in (
        (0, ValueError, "num_workers is 0"),
        (5, ValueError, "only 4 envs"),
        (1.5, TypeError, "num_workers is 1.5"),
    ):
        with pytest.raises(error, match=message):
            RayVecEnv(env_fns_for("CartPole-v1", 4), num_workers=bad)
    with pytest.raises(ValueError, match="timeout is -1"):
        RayVecEnv(env_fns_for("CartPole-v1", 4), timeout=-1)


@pytest.mark.usefixtures("ray_session", "no_leftover_processes")
def test_sb3_trains_on_it_through_the_drop_in():
    pytest.importorskip(
        "stable_baselines3", reason="Stable-Baselines3 is not installed: pip install 'vecenvs[sb3]'"
    )
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from vecenvs.sb3 import to_sb3

    env_fns = env_fns_for("CartPole-v1", 4)
    reference = DummyVecEnv(env_fns)
    with to_sb3(ray_backend(env_fns, autoreset_mode="SameStep"), monitor=False) as envs:
        envs.seed(3)
        reference.seed(3)
        np.testing.assert_array_equal(envs.reset(), reference.reset())
        for step in range(100):  # episode ends included: terminal_observation in the infos
            actions = np.array([step % 2, 0, 1, step % 3 % 2])
            observations, rewards, dones, infos = envs.step(actions)
            expected = reference.step(actions)
            np.testing.assert_array_equal(observations, expected[0])
            assert (
                dones.tolist() == expected[2].tolist() and rewards.tolist() == expected[1].tolist()
            )
            for info, expected_info in zip(infos, expected[3]):
                assert set(info) == set(expected_info)
                np.testing.assert_array_equal(
                    info.get("terminal_observation"), expected_info.get("terminal_observation")
                )
        model = PPO("MlpPolicy", envs, n_steps=32, batch_size=64, n_epochs=1, device="cpu")
        model.learn(total_timesteps=256)
        assert model.num_timesteps == 256
    reference.close()
