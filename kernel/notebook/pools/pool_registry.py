"""``pools``: this kernel's warm pools by name, and the launcher a ``%%train --pool NAME`` cell
runs on."""

from __future__ import annotations

from IPython.core.error import UsageError

from hotswitch.kernel.launch.named import foreign_options, launcher_options
from hotswitch.kernel.notebook.pools.pool import Pool, PoolError
from hotswitch.kernel.notebook.pools.pool_launcher import PoolLauncher


def pool_launcher_of(args, pools: PoolRegistry) -> PoolLauncher:
    """``%%train --pool NAME``: the launcher that runs the cell on that pool; UsageError for a
    pool that is missing, gone or busy, or options a pool's job cannot take."""
    for given, option in (
        (args.launcher != "local", "--launcher"),
        (args.detach, "--detach"),
        (args.nodes != 1, "--nodes"),
    ):
        if given:
            raise UsageError(
                f"%%train --pool with {option}: a pool's job runs on the pool's ranks and ends with this kernel; "
                f"drop {option} (or drop --pool for a job of its own)"
            )
    if foreign := foreign_options("local", launcher_options(args)):
        flags = " ".join(foreign[1])
        raise UsageError(f"%%train --pool with {flags}: a pool's job runs on the pool's ranks; drop {flags}")
    pool = pools[args.pool]
    if args.device not in (None, pool.device):
        raise UsageError(
            f"%%train --pool {args.pool} with --device {args.device}: the pool's ranks run on {pool.device}, "
            f"chosen when it started; drop --device, or start a pool with --device {args.device}"
        )
    try:
        pool.wait_ready()
        pool.check_free()
    except PoolError as error:
        raise UsageError(str(error)) from None
    return PoolLauncher(pool)


class PoolRegistry:
    """``pools``: this kernel's warm pools by name; ``close`` stops them all but detached ones."""

    def __init__(self):
        self._pools: dict[str, Pool] = {}

    def add(self, pool: Pool) -> None:
        self._pools[pool.name] = pool

    def __getitem__(self, name: str) -> Pool:
        """The pool ``name`` if it runs; UsageError naming how it died, or the pools there are."""
        pool = self._pools.get(name)
        if pool is None:
            raise UsageError(
                f"no pool named {name!r}; the pools are {sorted(self._pools)}. Start one: %train_pool start {name} -n 2"
            )
        if pool.death():
            raise UsageError(pool.death())
        return pool

    def in_use(self, name: str) -> bool:
        pool = self._pools.get(name)
        return pool is not None and pool.death() is None

    def remove(self, name: str) -> None:
        self._pools.pop(name, None)

    def stop(self, name: str) -> str:
        """Stop pool ``name`` (``%train_pool stop``) and forget it; its final status. UsageError
        when this kernel has no pool of that name, naming those it has."""
        pool = self._pools.get(name)
        if pool is None:
            there = ", ".join(repr(n) for n in sorted(self._pools))
            raise UsageError(
                f"there is no pool named {name!r} in this kernel; "
                + (f"its pools are {there}" if there else "it has no pools")
                + " (a detached pool of another kernel: %train_pool attach NAME, then stop it)"
            )
        status = pool.stop()
        self.remove(name)
        return status

    def table(self) -> str:
        rows = [f"{'name':<12}{'status':<10}{'ranks':>6}  {'launcher':<10}running"]
        for pool in self._pools.values():
            launcher = pool.job.launcher.name + (" (detached)" if pool.job.detached else "")
            rows.append(f"{pool.name:<12}{pool.status:<10}{pool.size:>6}  {launcher:<10}{pool.busy_with or '-'}")
        return "\n".join(rows)

    def close(self, grace: float = 2.0) -> None:
        """Stop every pool, except detached ones (``%train_pool attach NAME`` finds them again)."""
        for pool in list(self._pools.values()):
            if not pool.job.done and not pool.job.detached:
                pool.stop("the kernel shut down", grace=grace)

    def __repr__(self) -> str:
        return self.table()
