"""The notebook side: kernel, magics, jobs, launchers, channel and the command line.

``%load_ext hotswitch.kernel`` loads the ``%%train`` magics into any IPython. IPython is imported
only inside the two hooks below: worker processes import this package and must stay free of
Jupyter machinery.
"""


def load_ipython_extension(ipython) -> None:
    """Register ``%%train``, ``%jobs``, ``%train_stop`` and ``jobs``; stop every job at exit."""
    import atexit

    from hotswitch.kernel.magics import TrainMagics

    if getattr(ipython, "hotswitch_magics", None) is not None:
        return
    magics = TrainMagics(ipython)
    ipython.register_magics(magics)
    ipython.hotswitch_magics = magics
    atexit.register(magics.jobs.close)


def unload_ipython_extension(ipython) -> None:
    """Stop every job and forget the magics' cleanup hook."""
    import atexit

    magics = getattr(ipython, "hotswitch_magics", None)
    if magics is None:
        return
    magics.jobs.close()
    atexit.unregister(magics.jobs.close)
    ipython.hotswitch_magics = None
