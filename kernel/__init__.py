"""The notebook side, grouped by the process each part runs in: ``notebook`` (the kernel process:
kernel, magics, ``Job``, ``jobs``), ``launch`` (starting ranks: the launcher interface, torchrun),
``channel`` (the signed channel, both ends), ``worker`` (every rank) and ``cli`` (``hotswitch ...``).

``%load_ext hotswitch.kernel`` loads the ``%%train`` magics into any IPython. IPython is imported
only inside the two hooks below: worker processes import this package and must stay free of
Jupyter machinery. Its public names (``__all__``) are imported on first use.
"""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    "progress_table": "hotswitch.kernel.cli.progress:table",  # a run's summary as the terminal shows it
    "Job": "hotswitch.kernel.notebook.jobs.job",
}
__all__ = sorted([*_EXPORTS, "load_ipython_extension", "unload_ipython_extension"])

__getattr__ = lazy_exports(__name__, _EXPORTS)


def load_ipython_extension(ipython) -> None:
    """Register ``%%train``, ``%jobs``, ``%train_stop``, ``%train_pool``, ``%%ranks``,
    ``%train_debug``, ``%train_stacks``, ``jobs`` and ``pools``; stop every pool and job at exit."""
    import atexit
    import threading

    from hotswitch.kernel.notebook.cells.debug_magics import DebugMagics
    from hotswitch.kernel.notebook.cells.magics import TrainMagics
    from hotswitch.kernel.notebook.pools.pool_magics import PoolMagics

    if getattr(ipython, "hotswitch_magics", None) is not None:
        return
    magics = TrainMagics(ipython)
    ipython.register_magics(magics)
    ipython.register_magics(PoolMagics(ipython, magics.jobs, magics.pools))
    ipython.register_magics(DebugMagics(ipython, magics.jobs, magics.pools))
    ipython.hotswitch_magics = magics
    atexit.register(magics.close)
    threading.Thread(target=_warm_dashboard, name="hotswitch-warm-dashboard", daemon=True).start()


def _warm_dashboard() -> None:
    """Import the dashboard's plotly/ipywidgets stack (seconds, once) before the first
    ``%%train`` needs it, so that the cell still returns at once."""
    try:
        import plotly.graph_objs._figurewidget  # noqa: F401

        import hotswitch.widgets.dashboard  # noqa: F401
    except ImportError:
        pass  # no widgets: a job shows its text summary instead


def unload_ipython_extension(ipython) -> None:
    """Stop every pool and job and forget the magics' cleanup hook."""
    import atexit

    magics = getattr(ipython, "hotswitch_magics", None)
    if magics is None:
        return
    magics.close()
    atexit.unregister(magics.close)
    ipython.hotswitch_magics = None
