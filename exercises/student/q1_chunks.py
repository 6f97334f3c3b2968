"""Exercise 1: split N envs over K workers.

A pool of K workers steps N envs by giving each worker a *chunk*: a run of consecutive env
indices. ``vecenvs.PoolVecEnv`` does exactly this (``envs.chunks`` shows the result;
``split_evenly`` in ``vecenvs/core.py`` is how, once you have written your own).

Write ``split_envs(num_envs, num_workers)``:

- it returns ``num_workers`` chunks, each a ``range`` of consecutive env indices;
- together, in order, they cover ``0 .. num_envs - 1`` once each;
- their sizes differ by at most one (so no worker is the straggler every step), the smaller
  chunks first: ``split_envs(10, 3) == [range(0, 3), range(3, 6), range(6, 10)]`` (the pool's
  first chunk is stepped by the calling process, which also does the serial part of every
  step: checking the actions, copying the results out);
- it raises ``ValueError`` when ``num_workers < 1`` or ``num_workers > num_envs`` (a worker
  with no env would only add overhead).

Check your work: ``pytest exercises/checks -k q1``.
"""


def split_envs(num_envs: int, num_workers: int) -> list[range]:
    """Env indices 0..num_envs-1 in ``num_workers`` consecutive chunks of near-equal size."""
    raise NotImplementedError("Exercise 1: write split_envs (hint: divmod(num_envs, num_workers))")
