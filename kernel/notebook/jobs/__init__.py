"""A ``%%train`` job seen from the kernel: ``Job``, its watcher thread, what its ranks report,
how it ended, its run folder, and the ``jobs`` registry."""
