"""The kernel process: the ``HotSwitchKernel``, the ``%%train`` magics, ``Job``, the ``jobs``
registry, where a job's output goes, and the kernelspec.

Nothing here is imported by a worker process; importing this package itself loads nothing.
"""
