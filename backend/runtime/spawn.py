"""Run a function on ``world_size`` local processes joined in one process group.

Used by the tests and benchmarks to exercise real ``torch.distributed`` ranks
without a launcher. The first failing rank's traceback is raised, labelled
with its rank, and every other rank is torn down; a run past ``timeout``
kills them all.

Ranks start from a fork server that has imported torch and the engine once (``PRELOAD``):
a fresh interpreter per rank spent about 7 s of wall time and 12 s of CPU importing torch for
every 4-rank run on a 2-core machine, a fork of the server 0.15 s. The server never touches a
device or a process group, so its forks start as clean as spawned interpreters; each rank
takes the caller's environment and working directory as they are at the call, as a spawned
one would. Where fork servers do not exist (Windows), ranks are spawned.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import queue
import time
import traceback
from collections.abc import Callable
from typing import Any


class RankError(RuntimeError):
    """A rank raised; the message carries ``[rank N]`` and its traceback."""


def meeting_store():
    """The store the ranks meet in, served from this process on whatever loopback port is free as
    it binds: a port probed free and handed to rank 0 to bind could be taken in between, on a
    machine where other processes open connections all the while."""
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


def _dumps(value: Any) -> bytes:
    # bytes, not tensors: a queue would pass tensors as shared-memory handles that die with
    # the worker process
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _loads(data: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(data), weights_only=False)


# what the fork server imports once, for every rank it forks (an import that fails is skipped);
# torch._dynamo because tracing a model on meta tensors imports it (PyTorch's meta kernels are
# Python references guarded by it): 2-6 s of CPU per rank otherwise; scipy.optimize because
# planning a switch solves a linear program (1.6 s of CPU per rank)
PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "scipy.optimize", "hotswitch.backend.train.loop.engine"]


def _context() -> mp.context.SpawnContext | mp.context.ForkServerContext:
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _worker(fn, rank, world_size, port, backend, args, results, environ, cwd) -> None:
    os.environ.clear()
    os.environ.update(environ)  # the caller's, as it is now (the server's is as it was at its start)
    os.chdir(cwd)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))  # as torchrun does: no oversubscription

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    try:
        store = dist.TCPStore("127.0.0.1", port, is_master=False)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        results.put((rank, True, _dumps(fn(rank, world_size, *args))))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn_ranks(
    fn: Callable[..., Any], world_size: int, *args: Any, backend: str = "gloo", timeout: float = 300.0
) -> list[Any]:
    """``fn(rank, world_size, *args)`` on every rank; returns the results in rank order."""
    ctx = _context()
    results = ctx.Queue()
    store = meeting_store()  # kept until every rank has ended
    port = store.port
    caller = (dict(os.environ), os.getcwd())
    procs = [
        ctx.Process(target=_worker, args=(fn, rank, world_size, port, backend, args, results, *caller), daemon=True)
        for rank in range(world_size)
    ]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(out) < world_size:
            try:
                rank, ok, value = results.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"ranks {sorted(set(range(world_size)) - set(out))} did not finish in {timeout:.0f}s"
                    ) from None
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in out]
                if dead:
                    raise RankError(f"[rank {dead[0]}] exited with code {procs[dead[0]].exitcode}") from None
                continue
            if not ok:
                raise RankError(f"[rank {rank}]\n{value}")
            out[rank] = _loads(value)
    finally:
        for p in procs:
            p.join(timeout=5 if len(out) == world_size else 0.1)
            if p.is_alive():
                p.kill()
                p.join()
    return [out[r] for r in range(world_size)]
