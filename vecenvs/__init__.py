"""vecenvs: ways to step many gymnasium environments in parallel, and the tools to measure them."""

from vecenvs import envs  # noqa: F401  (registers the teaching envs with gymnasium)
from vecenvs.async_pool import AsyncPoolVecEnv
from vecenvs.cpus import available_cpus
from vecenvs.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    ConcurrentCallError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.factory import BACKENDS, make_vec
from vecenvs.multi_env import MultiEnv
from vecenvs.pool import PoolVecEnv
from vecenvs.ray_env import RayVecEnv  # Ray itself is imported only when one is built
from vecenvs.subproc import SubprocVecEnv

__all__ = [
    "BACKENDS",
    "AlreadyPendingCallError",
    "AsyncPoolVecEnv",
    "ClosedEnvironmentError",
    "ConcurrentCallError",
    "EnvCrashedError",
    "MultiEnv",
    "NoAsyncCallError",
    "PoolVecEnv",
    "RayVecEnv",
    "SubprocVecEnv",
    "VecEnvError",
    "WorkerDiedError",
    "WorkerTimeoutError",
    "available_cpus",
    "make_vec",
]

__version__ = "0.1.0"
