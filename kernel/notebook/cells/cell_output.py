"""Where a job's output goes: the notebook cell that launched it, from any thread."""

from __future__ import annotations

import sys


class KernelCellOutput:
    """Sends ``stream`` messages on IOPub with the launching cell's header as parent.

    Frontends route output by parent message id, so lines from a background thread land in
    the cell that ran ``%%train`` even while other cells execute. ``kernel.iopub_socket`` is
    ipykernel's thread-safe background socket, so this may be called from the channel thread.
    """

    def __init__(self, kernel):
        self._kernel = kernel
        self._parent = kernel.get_parent("shell")

    def write(self, text: str, stream: str = "stdout") -> None:
        kernel = self._kernel
        kernel.session.send(
            kernel.iopub_socket,
            "stream",
            {"name": stream, "text": text},
            parent=self._parent,
            ident=f"kernel.{kernel.ident}.stream".encode(),  # the IOPub topic ipykernel gives stream output
        )


class ConsoleOutput:
    """Outside a kernel (terminal IPython, tests): the process' own stdout and stderr;
    ``all_to_stderr`` keeps stdout free for a command's own result (``--json``)."""

    def __init__(self, all_to_stderr: bool = False):
        self.all_to_stderr = all_to_stderr

    def write(self, text: str, stream: str = "stdout") -> None:
        target = sys.__stderr__ if stream == "stderr" or self.all_to_stderr else sys.__stdout__
        if target is None:  # a process without that stream (pythonw): nowhere to write
            return
        target.write(text)
        target.flush()


def output_for_current_cell(shell):
    """The output of the cell now executing in ``shell`` (an IPython shell)."""
    kernel = getattr(shell, "kernel", None)
    return KernelCellOutput(kernel) if kernel is not None else ConsoleOutput()
