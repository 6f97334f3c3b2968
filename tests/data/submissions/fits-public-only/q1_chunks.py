"""Fits only the public examples: the best splits of the public cases, from a table."""

import math

KNOWN = {
    ((5, 1, 1, 1, 1, 1, 1, 1, 1, 1), 4): [1, 1, 3, 5],
    ((1, 2, 3, 4, 5, 6, 7, 8, 9), 3): [5, 2, 2],
    ((10, 10, 10, 1, 1, 1, 30), 3): [2, 4, 1],
    ((0, 0, 7, 0, 0), 2): [1, 4],
    ((2.5, 0.5, 1.5, 3.0, 0.25, 4.0), 2): [3, 3],
}

BEST_POSSIBLE_SPEEDUP = 3.0  # the right form, the wrong reasoning
FEWEST_WORKERS_FOR_IT = 2


def split_by_cost(costs, num_workers):
    if not 1 <= num_workers <= len(costs):
        raise ValueError("bad number of workers")
    if any(not math.isfinite(cost) or cost < 0 for cost in costs):
        raise ValueError("bad cost")
    sizes = KNOWN.get((tuple(costs), num_workers))
    if sizes is None:  # by count, as if every env cost the same
        base, extra = divmod(len(costs), num_workers)
        sizes = [base + (index >= num_workers - extra) for index in range(num_workers)]
    chunks, start = [], 0
    for size in sizes:
        chunks.append(range(start, start + size))
        start += size
    return chunks
