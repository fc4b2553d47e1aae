"""A rank that seems hung says what it waits on: SIGUSR1 writes every thread's stack to its log."""

import os
import signal
import subprocess
import sys
import time

import pytest

from hotswitch.kernel.launch.launcher import rank_log

WAITING = """
import os, sys, threading, time
from hotswitch.kernel.worker.rank_log import open_rank_log, stacks_on_signal
stacks_on_signal(open_rank_log(0))
threading.Thread(target=lambda: time.sleep(600), name="side", daemon=True).start()
def waits_for_a_peer():
    print("ready", flush=True)  # from here on the main thread's stack names this function
    time.sleep(600)
waits_for_a_peer()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="SIGUSR1 is POSIX")
def test_sigusr1_writes_every_threads_stack_to_the_rank_log_and_the_rank_goes_on(tmp_path):
    env = {**os.environ, "HOTSWITCH_LOG_DIR": str(tmp_path)}
    rank = subprocess.Popen([sys.executable, "-c", WAITING], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout is not None and rank.stdout.readline().strip() == "ready"
        rank.send_signal(signal.SIGUSR1)
        log = rank_log(tmp_path, 0)
        deadline = time.monotonic() + 60
        while "waits_for_a_peer" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        assert "waits_for_a_peer" in text and text.count("hread 0x") >= 2, text  # "Current thread", "Thread"
        assert rank.poll() is None, "the rank goes on after writing its stacks"
    finally:
        rank.kill()
        rank.wait()
