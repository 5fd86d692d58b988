"""A grid-wide barrier for a persistent launch whose programs are all resident at once.

`sync` holds two int32 counters, [arrived, generation], zero when first allocated and left ready
for the next barrier by every barrier (it never needs resetting):

    generation_seen = generation                  (acquire)
    if atomic_add(arrived, 1) == num_programs - 1:  the last program to arrive
        arrived = 0;  generation += 1             (release: publishes the reset and every store)
    else:
        spin while generation == generation_seen  (plain volatile loads: they do not contend with the
                                                   arrivals' atomics the way spinning atomics do)
        read generation once more                 (acquire: orders this program's later accesses)

`tl.debug_barrier()` on both sides orders the stores and loads of all threads of a program around
the single atomic each step issues (scalar atomics run once per program): the pattern of CUDA's
cooperative-groups grid sync. Deadlock-free only if every program of the grid is resident, so the
grid must not exceed the number of programs the GPU runs at once (one per SM is always safe for a
kernel that fits on an SM), and no two launches may share one `sync` at the same time.
"""

import triton
import triton.language as tl


@triton.jit
def grid_barrier(
    sync,  # (2,) int32: [arrived, generation]
    num_programs,
):
    tl.debug_barrier()
    generation_seen = tl.atomic_add(sync + 1, 0, sem="acquire", scope="gpu")
    arrived = tl.atomic_add(sync, 1, sem="acq_rel", scope="gpu")
    if arrived == num_programs - 1:
        tl.atomic_xchg(sync, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(sync + 1, 1, sem="release", scope="gpu")
    else:
        while tl.load(sync + 1, volatile=True) == generation_seen:
            pass
        # the acquire read, as a loop condition so that the compiler keeps it (it runs once: the
        # generation has already moved); an acquire read with an unused result gets dropped
        while tl.atomic_add(sync + 1, 0, sem="acquire", scope="gpu") == generation_seen:
            pass
    tl.debug_barrier()
