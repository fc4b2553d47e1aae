"""The rank side: what every rank of a job runs, whatever launcher started it.

``python -m hotswitch.kernel.worker BODY`` (``entry``) connects the channel, redirects the
rank's output onto it (``rank_stream``), watches for its kernel going away (``watchdog``) and
runs the cell body with ``job`` (``context``). Never imports ipykernel or ipywidgets.
"""
