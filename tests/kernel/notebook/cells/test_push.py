"""``%%train --push``: notebook values reach the body on every rank, in a real kernel."""

import pytest

from tests.kernel.kernel_session import hotswitch_kernel


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    yield session
    session.shutdown()


def test_pushed_notebook_values_reach_the_body_on_every_rank(kernel):
    kernel.execute("settings = {'lr': 3e-4, 'files': ['a.txt']}\nwarmup = 7")
    body = "job.emit({'type': 'pushed', 'settings': settings, 'warmup': warmup})\n"
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name pushed --push settings,warmup\n" + body)
    assert reply["status"] == "ok", kernel.text(msg_id)
    pushed = kernel.value('sorted(jobs["pushed"].events_of("pushed"), key=lambda e: e["rank"])')
    assert [(e["rank"], e["settings"], e["warmup"]) for e in pushed] == [
        (rank, {"lr": 3e-4, "files": ["a.txt"]}, 7) for rank in (0, 1)
    ]
