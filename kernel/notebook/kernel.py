"""``HotSwitchKernel``: the IPython kernel with the ``%%train`` magics loaded at start."""

from __future__ import annotations

from ipykernel.ipkernel import IPythonKernel


class HotSwitchKernel(IPythonKernel):
    """Stops every pool and job when the kernel shuts down or restarts (atexit covers other exits)."""

    implementation = "hotswitch"
    implementation_version = "0.1.0"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        assert self.shell is not None  # ipykernel's kernel makes its shell as it starts
        self.shell.extension_manager.load_extension("hotswitch.kernel")

    def do_shutdown(self, restart):
        magics = getattr(self.shell, "hotswitch_magics", None)
        if magics is not None:
            magics.close()
        return super().do_shutdown(restart)
