"""Numeric precision of training: what strategies compute in and what gradients accumulate in.

``fp32`` computes and accumulates in fp32 and is exact against one device (the test oracle).
``bf16`` is how the paper and production trainers train: the instantiation strategy keeps fp32
master weights and AdamW's moments, every strategy computes with bf16 copies of the
parameters, gradients accumulate in ``grad`` (fp32 by default) and the update casts back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # torch is imported on use: planning and the run configuration read precisions without it
    import torch

DType = Literal["fp32", "bf16"]
TORCH_NAMES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16"}  # each DType's torch dtype
ITEMSIZES: dict[str, int] = {"fp32": 4, "bf16": 2}


def _checked(what: str, value: str) -> DType:
    if value not in TORCH_NAMES:
        raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(TORCH_NAMES)}")
    return value  # type: ignore[return-value]


def torch_dtype(name: DType) -> torch.dtype:
    import torch

    return getattr(torch, TORCH_NAMES[name])


@dataclass(frozen=True)
class Precision:
    compute: DType = "fp32"
    grad: DType = "fp32"

    def __post_init__(self) -> None:
        _checked("precision", self.compute)
        _checked("grad_dtype", self.grad)
        if self.compute == "fp32" and self.grad != "fp32":
            raise ValueError(f"grad_dtype {self.grad!r} needs precision 'bf16': fp32 training accumulates in fp32")

    @classmethod
    def of(cls, precision: str = "fp32", grad_dtype: str | None = None) -> Precision:
        """``precision`` with ``grad_dtype`` (default fp32)."""
        return cls(_checked("precision", precision), _checked("grad_dtype", grad_dtype or "fp32"))

    def as_settings(self) -> dict:
        """The run settings that train in this precision (``precision``, ``grad_dtype``)."""
        return {"precision": self.compute, "grad_dtype": self.grad if self.mixed else None}

    @property
    def mixed(self) -> bool:
        """Whether the master weights are a separate fp32 copy of what strategies compute with."""
        return self.compute != "fp32"

    @property
    def compute_dtype(self) -> torch.dtype:
        return torch_dtype(self.compute)

    @property
    def grad_dtype(self) -> torch.dtype:
        return torch_dtype(self.grad)

    @property
    def param_bytes(self) -> int:
        """Bytes per element of the parameter copies strategies compute with (and switch)."""
        return ITEMSIZES[self.compute]

    @property
    def grad_bytes(self) -> int:
        return ITEMSIZES[self.grad]

    @property
    def master_bytes(self) -> int:
        """Bytes per parameter the instantiation strategy keeps beyond its strategy copy:
        AdamW's two fp32 moments, plus fp32 master weights (and an fp32 gradient to update
        them with, when gradients accumulate in bf16) in mixed precision."""
        extra = (4 + (4 if self.grad != "fp32" else 0)) if self.mixed else 0
        return 8 + extra

    def __str__(self) -> str:
        return self.compute if self.grad == "fp32" or not self.mixed else f"{self.compute}/grad {self.grad}"


FP32 = Precision()


def check_supported(precision: Precision, device: str) -> None:
    """Raise, naming the fix, when ``device`` cannot compute in ``precision``."""
    if precision.compute != "bf16":
        return
    import torch

    if device.startswith("cuda") and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        raise ValueError("precision 'bf16': this GPU has no bf16 support; train with --precision fp32")
    if device == "cpu":
        try:
            a = torch.ones(2, 2, dtype=torch.bfloat16)
            (a @ a).sum().item()
        except RuntimeError as error:
            raise ValueError(
                f"precision 'bf16': this PyTorch build cannot multiply bf16 matrices on CPU ({error}); "
                "train with --precision fp32"
            ) from None


def accumulate_into(buffer: torch.Tensor):
    """A post-accumulate-grad hook adding a parameter's gradient into ``buffer`` in the
    buffer's dtype (Megatron's ``main_grad``: bf16 parameters, fp32 accumulation)."""

    def hook(param: torch.Tensor) -> None:
        assert param.grad is not None  # the hook runs once the gradient is accumulated
        buffer.add_(param.grad)
        param.grad = None

    return hook
