"""Starting a job's ranks, kernel side: the ``Launcher`` interface and local torchrun."""
