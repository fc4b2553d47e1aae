"""The kernel process, by concept: ``cells/`` (the ``%%train`` magics and what a cell becomes),
``jobs/`` (``Job``, its watchers and the ``jobs`` registry), ``pools/`` (warm ranks that
outlive cells); here, the ``HotSwitchKernel`` and its kernelspec.

Nothing here is imported by a worker process; importing this package itself loads nothing.
"""
