"""Exercise 1, reference solution: share the envs out so that no worker is the straggler."""

from __future__ import annotations

import math

COSTS_B = [400] + [20] * 30


def split_by_cost(costs: list[float], num_workers: int) -> list[range]:
    """``num_workers`` consecutive chunks of ``range(len(costs))`` whose most expensive chunk
    costs as little as possible."""
    num_envs = len(costs)
    if not 1 <= num_workers <= num_envs:
        raise ValueError(f"num_workers must be from 1 to len(costs)={num_envs}, got {num_workers}")
    for index, cost in enumerate(costs):
        if not (isinstance(cost, (int, float)) and math.isfinite(cost) and cost >= 0):
            raise ValueError(f"costs[{index}] = {cost!r}: expected a finite number >= 0")
    # prefix[i] = cost of envs 0..i-1, so a chunk i..j-1 costs prefix[j] - prefix[i].
    prefix = [0.0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    # best[k][j]: the least possible cost of the most expensive chunk when the first j envs
    # are split into k non-empty chunks; cut[k][j]: where that split's last chunk starts.
    best = [[math.inf] * (num_envs + 1) for _ in range(num_workers + 1)]
    cut = [[0] * (num_envs + 1) for _ in range(num_workers + 1)]
    best[0][0] = 0.0
    for k in range(1, num_workers + 1):
        # The other k - 1 workers need one env each, before and after: j from k to N - (K - k).
        for j in range(k, num_envs - (num_workers - k) + 1):
            for i in range(k - 1, j):  # the last chunk is i..j-1
                largest = max(best[k - 1][i], prefix[j] - prefix[i])
                if largest < best[k][j]:
                    best[k][j], cut[k][j] = largest, i
    chunks, end = [], num_envs
    for k in range(num_workers, 0, -1):
        start = cut[k][end]
        chunks.append(range(start, end))
        end = start
    return chunks[::-1]


def chunk_cost(costs: list[float], chunks: list[range]) -> float:
    """The cost of the most expensive chunk: how long one step takes."""
    return max(sum(costs[index] for index in chunk) for chunk in chunks)


# A step cannot take less than its most expensive env, which no split can share out: with one
# env per worker, the step takes max(costs). One worker takes sum(costs).
BEST_POSSIBLE_SPEEDUP = sum(COSTS_B) / max(COSTS_B)  # 1000 / 400 = 2.5
FEWEST_WORKERS_FOR_IT = next(  # 3: the expensive env alone, then 20 + 10 cheap ones
    workers
    for workers in range(1, len(COSTS_B) + 1)
    if chunk_cost(COSTS_B, split_by_cost(COSTS_B, workers)) <= max(COSTS_B)
)
