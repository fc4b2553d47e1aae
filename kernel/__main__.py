"""``python -m hotswitch.kernel -f CONNECTION_FILE``: start a HotSwitchKernel (the kernelspec's argv)."""

from ipykernel.kernelapp import IPKernelApp

from hotswitch.kernel.notebook.kernel import HotSwitchKernel

if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=HotSwitchKernel)
