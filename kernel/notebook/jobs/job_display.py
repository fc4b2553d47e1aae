"""How a ``Job`` shows in a notebook: its live dashboard where widgets load, else its summary."""

from __future__ import annotations

from html import escape


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


def job_repr(job) -> str:
    """A job's one line: its name, status, ranks and events."""
    spec = job.spec
    return f"<Job {job.name!r} {job.status}, {spec.nproc}x{spec.nodes} ranks, {len(job.events)} events>"


def job_html(job) -> str:
    return (
        f"<b>Job {escape(job.name)}</b>: {escape(job.status)} &mdash; "
        f"{job.spec.nproc} process(es) x {job.spec.nodes} node(s), {len(job.events)} events"
    )
