"""The names of attention's kernels, as settings and events write them, without importing torch
(the command line checks a run configuration before any rank starts): each name with the member
of PyTorch's ``SDPBackend`` it stands for (``attention.kernels.KERNELS``)."""

SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
KERNEL_NAMES = tuple(SDPA_BACKENDS)
CPU_KERNELS = ("flash", "math")  # the ones PyTorch runs on the CPU
