"""vecenvs: three ways to step many gymnasium environments, and the tools to measure them."""

from vecenvs import envs  # noqa: F401  (registers the teaching envs with gymnasium)
from vecenvs.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)

__version__ = "0.1.0"
