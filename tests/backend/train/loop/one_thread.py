"""The one-device oracle computed in the test process on one thread, as each rank computes."""

import contextlib

import torch


@contextlib.contextmanager
def one_thread():
    """Torch on one thread inside the block, on as many as before after it. Where the other cores
    are busy (pytest-xdist's other worker, a test's ranks), a second OpenMP thread waits for a core
    at every small operator, so the tiny models' oracles ran several times slower on two threads
    than on one; their gradients and losses came out bit for bit the same on either."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
