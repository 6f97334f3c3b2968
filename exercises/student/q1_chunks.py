"""Exercise 1: share the envs out so that no worker is the straggler.

A pool of K workers steps N envs by giving each worker a *chunk*: a run of consecutive env
indices (consecutive, because a worker writes its envs' results into one slice of the shared
buffers). Every step waits for the slowest worker (notebook 3's barrier), so one step takes as
long as the chunk whose envs take longest in total.

``vecenvs.PoolVecEnv`` assumes that every env costs the same. Here they do not: ``costs[i]`` is
env i's measured step time, and some envs are much slower than others (a robot in contact, a
larger level, a longer episode to render...).

Part A. Write ``split_by_cost(costs, num_workers)``:

- it returns ``num_workers`` chunks, each a non-empty ``range`` of consecutive env indices,
  which together, in order, cover ``0, 1, ..., len(costs) - 1`` once each;
- the cost of its most expensive chunk (the sum of that chunk's costs) is as small as any such
  split can make it;
- it raises ``ValueError`` when ``num_workers`` is less than 1 or more than ``len(costs)``, or
  when a cost is negative, NaN or infinite (before doing any work).

Part B. Replace each ``None`` with your answer. The checks you run say whether an answer has the
right form; whether it is right is graded later.

Check your work: ``pytest exercises/checks -k q1``.
"""

#: Step times in µs: one expensive env first, then thirty cheap ones.
COSTS_B = [400] + [20] * 30

#: Whatever the number of workers, how many times faster than one worker can a step of the envs
#: in COSTS_B get, at best? (A number, e.g. 4.0.)
BEST_POSSIBLE_SPEEDUP = None

#: The fewest workers whose best split of COSTS_B reaches that speed-up. (A whole number.)
FEWEST_WORKERS_FOR_IT = None


def split_by_cost(costs: list[float], num_workers: int) -> list[range]:
    """``num_workers`` consecutive chunks of ``range(len(costs))`` whose most expensive chunk
    costs as little as possible."""
    raise NotImplementedError("Exercise 1: write split_by_cost")
