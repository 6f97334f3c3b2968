"""The ``if __name__ == "__main__":`` guard: a worker that finds it missing says so.

Under the ``spawn`` start method (macOS's and Windows' default) and ``forkserver`` (Python
3.14's on Linux) a new process imports the main script again, as ``__mp_main__``, before it runs
anything it was started for. A script that builds a vector env at its top level, not under
``if __name__ == "__main__":``, builds one again in each worker, which would start processes of
its own while it is still starting: Python refuses ("An attempt has been made to start a new
process before the current process has finished its bootstrapping phase"), the worker dies, and
the parent would only know that a worker died while making its envs.

So a backend about to start processes calls :func:`exit_if_bootstrapping` first. In a worker
that is importing the main script, it prints what happened and how to fix it, then ends the
process with :data:`EXIT_CODE`, which the parent's :class:`~vecenvs.errors.WorkerDiedError`
recognises (:func:`explain`). ``os._exit`` rather than ``sys.exit``: the forkserver's child
reports its own exit code 1 for any exception, ``SystemExit`` included.
"""

from __future__ import annotations

import os
import sys

__all__ = ["EXIT_CODE", "bootstrapping", "exit_if_bootstrapping", "explain"]

#: The exit code of a worker that stopped because the script it imported builds a vector env
#: outside ``if __name__ == "__main__":`` (rare enough not to be an env's own).
EXIT_CODE = 121

#: Why, in the words of the error the parent raises.
EXPLANATION = (
    "the worker imports your script again (the spawn and forkserver start methods do), and "
    'the script builds a vector env at its top level, outside `if __name__ == "__main__":`, '
    "so the worker would start processes of its own before it had finished starting (Python: "
    '"An attempt has been made to start a new process before the current process has finished '
    'its bootstrapping phase"). Put the code that builds and uses the envs under `if __name__ '
    '== "__main__":` (a function called from there is fine)'
)


def bootstrapping() -> bool:
    """Whether this process is a new process still importing the main script."""
    modules = [sys.modules.get("multiprocess.process"), sys.modules.get("multiprocessing.process")]
    return any(
        getattr(module.current_process(), "_inheriting", False)
        for module in modules
        if module is not None
    )


def exit_if_bootstrapping() -> None:
    """Ends this process with :data:`EXIT_CODE`, after saying why on stderr, if it is a new
    process still importing the main script (see the module's docstring); else returns."""
    if not bootstrapping():
        return
    sys.stderr.write(f"vecenvs: this process stops: {EXPLANATION}.\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)


def explain(exitcode: int | None) -> str | None:
    """The cause of a worker's death with ``exitcode``, if it is the missing guard's."""
    return EXPLANATION if exitcode == EXIT_CODE else None
