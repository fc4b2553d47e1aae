"""How a ``Job`` shows in a notebook: its live dashboard where widgets load, else its summary."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Protocol

from hotswitch.kernel.launch.launcher import LaunchSpec


def job_bundle(job, include=None, exclude=None) -> dict | None:
    """The dashboard's mime bundle with the job's text repr beside it; None (the front end falls
    back to the other reprs) when ``hotswitch.widgets`` does not import."""
    try:
        from hotswitch.widgets import Dashboard
    except ImportError:
        return None
    # a finished job draws at once from its events (no update left to follow, none to lose)
    dashboard = Dashboard.replay(list(job.events), job) if job.done else Dashboard(job)
    bundle = dashboard._repr_mimebundle_(include=include, exclude=exclude)
    if isinstance(bundle, dict):  # front ends without widgets (and logs) still read the job's summary
        bundle["text/plain"] = repr(job)
    return bundle


class ShownJob(Protocol):
    """What the representations read of the job they are mixed into (``Job``)."""

    name: str
    spec: LaunchSpec

    @property
    def status(self) -> str: ...

    @property
    def events(self) -> Sequence[dict]: ...


class JobDisplay:
    """A ``Job``'s representations: text, HTML, and the live dashboard."""

    def __repr__(self: ShownJob) -> str:
        spec = self.spec
        return f"<Job {self.name!r} {self.status}, {spec.nproc}x{spec.nodes} ranks, {len(self.events)} events>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return job_bundle(self, include, exclude)

    def _repr_html_(self) -> str:
        return job_html(self)


def job_html(job) -> str:
    return (
        f"<b>Job {escape(job.name)}</b>: {escape(job.status)} &mdash; "
        f"{job.spec.nproc} process(es) x {job.spec.nodes} node(s), {len(job.events)} events"
    )
