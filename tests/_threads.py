"""``kernel_threads(n)``: run a block under n kernel threads and restore the previous count even
when the block fails (so one failing test never leaks its thread count into the next)."""
import contextlib

import rlox


@contextlib.contextmanager
def kernel_threads(n):
    before = rlox.get_num_threads()
    rlox.set_num_threads(n)
    try:
        yield n
    finally:
        rlox.set_num_threads(before)
