"""``%train_pool``'s refusals speak of what the user typed: a bad pool name is called the pool
name (not ``--name``, which ``%train_pool`` has not), and stopping a pool that does not exist
says so and names the pools there are, without offering to start one."""

import pytest
from IPython.core.error import UsageError

from hotswitch.kernel.notebook.pools.pool_magics import check_pool_name
from hotswitch.kernel.notebook.pools.pool_registry import PoolRegistry


class FakePool:
    """What the registry needs of a pool to stop it."""

    def __init__(self, name: str):
        self.name, self.stopped = name, False

    def stop(self) -> str:
        self.stopped = True
        return "stopped"


@pytest.mark.parametrize(
    ("typed", "shown"),
    [("'bad name'", "'bad name'"), ('"bad name"', '"bad name"'), ("a/b", "'a/b'"), (".hidden", "'.hidden'")],
)
def test_a_bad_pool_name_is_refused_as_the_pool_name_the_user_typed(typed, shown):
    with pytest.raises(UsageError) as refused:
        check_pool_name(typed)  # as %train_pool's arguments arrive: quotes kept
    message = str(refused.value)
    assert f"the pool name {shown} is not valid" in message and "%train_pool start warm" in message
    assert "--name" not in message
    assert check_pool_name("warm-2.b") == "warm-2.b"


def test_stopping_a_missing_pool_says_there_is_none_and_that_none_exist():
    with pytest.raises(UsageError) as refused:
        PoolRegistry().stop("nosuchpool")
    message = str(refused.value)
    assert "there is no pool named 'nosuchpool'" in message and "it has no pools" in message
    assert "%train_pool start" not in message


def test_stopping_a_missing_pool_names_the_pools_there_are_and_stops_none():
    pools = PoolRegistry()
    warm, big = FakePool("warm"), FakePool("big")
    pools.add(warm)
    pools.add(big)
    with pytest.raises(UsageError, match=r"no pool named 'nosuchpool' in this kernel; its pools are 'big', 'warm'"):
        pools.stop("nosuchpool")
    assert not warm.stopped and not big.stopped
    assert pools.stop("warm") == "stopped" and warm.stopped
    with pytest.raises(UsageError, match="its pools are 'big' "):
        pools.stop("warm")  # stopped pools are forgotten
