"""``python -m vecenvs ...``: the same command line as the ``vecenvs`` script."""

from vecenvs.cli import main

# The guard matters: with the "spawn" and "forkserver" start methods, every worker process
# imports this module again, and must not start a benchmark of its own.
if __name__ == "__main__":
    raise SystemExit(main())
