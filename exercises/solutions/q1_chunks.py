"""Exercise 1, reference solution: split N envs over K workers."""


def split_envs(num_envs: int, num_workers: int) -> list[range]:
    """Env indices 0..num_envs-1 in ``num_workers`` consecutive chunks of near-equal size."""
    if not 1 <= num_workers <= num_envs:
        raise ValueError(
            f"num_workers must be between 1 and num_envs={num_envs}, got {num_workers}"
        )
    # vecenvs.core.split_evenly does the same: a solution is written out, not imported.
    # Every worker gets `base` envs; the last `extra` workers get one more (the first chunk is
    # the caller's, which also does the serial part of each step).
    base, extra = divmod(num_envs, num_workers)
    chunks, start = [], 0
    for worker in range(num_workers):
        size = base + (1 if worker >= num_workers - extra else 0)
        chunks.append(range(start, start + size))
        start += size
    return chunks
