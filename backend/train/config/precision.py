"""The precision and memory section of a run configuration: the dtypes the ranks compute and
accumulate gradients in, the bytes each device may hold, the tokens per micro-batch (padded
rows, or documents packed back to back), whether each block's tensor math is compiled, and
attention's kernel."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace

from hotswitch.backend.models.attention.names import CPU_KERNELS, KERNEL_NAMES
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import TORCH_NAMES, Precision, check_supported
from hotswitch.backend.train.config.setting import bad_setting, choice, positive, setting, three_way, whole
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.backend.train.planning.memory import check_budget_holds_states

TOKEN_BUDGET = 1024  # tokens per micro-batch where max_len is shorter
EXPERT_KERNELS = ("grouped", "loop")  # models.experts.KERNELS, named without importing torch
EXAMPLE_BUDGET = 8e6  # bytes, only quoted in the message for a bad memory_budget


@dataclass(frozen=True)
class PrecisionSettings:
    """``compute`` "bf16" computes with bf16 copies of fp32 master weights (``backend.precision``);
    ``grad_dtype`` (bf16 only) is what gradients accumulate and switch in."""

    compute: str = setting(
        "fp32", "fp32, or bf16: bf16 compute with fp32 master weights", key="precision", choices=tuple(TORCH_NAMES)
    )
    grad_dtype: str | None = setting(
        None, "bf16 only: what gradients accumulate and switch in; default: fp32", choices=tuple(TORCH_NAMES)
    )
    memory_budget: float | None = setting(
        None,
        "bytes per device the plan must fit in; default: none for a fixed plan, for auto what the device "
        "has free (on cuda: its memory less what the instantiation strategy always holds)",
    )
    token_budget: int | None = setting(
        None, f"tokens per micro-batch, padding included; default: {TOKEN_BUDGET}, or --max-len where longer"
    )
    packing: bool = setting(
        False,
        "pack micro-batches: documents back to back in rows of up to token_budget tokens, no padding, "
        "attention within each document",
    )
    compile: bool | None = setting(
        None,
        "torch.compile each run of tensor math between attentions (norms, rotary, SwiGLU fuse; one compile "
        "serves every block); default: on cuda",
    )
    attention: str = setting(
        "auto",
        "attention's kernel: auto (the fastest measured on the device at start: cudnn, flash or efficient on cuda), "
        "or one of " + ", ".join(KERNEL_NAMES),
        choices=("auto", *KERNEL_NAMES),
    )

    experts: str = setting(
        "auto",
        "a mixture of experts' kernel: auto (the faster measured on the device at start), grouped "
        "(torch._grouped_mm: every expert in three grouped matmuls) or loop (one expert after another)",
        choices=("auto", *EXPERT_KERNELS),
    )

    def check(self, max_len: int, device: str) -> PrecisionSettings:
        """This section checked for sequences of up to ``max_len`` tokens on ``device`` (a kind);
        ``token_budget`` and ``compile`` filled in."""
        token_budget = max(TOKEN_BUDGET, max_len) if self.token_budget is None else self.token_budget
        whole("token_budget", token_budget, max_len, " (max_len): a micro-batch holds at least one whole sequence")
        positive("memory_budget", self.memory_budget, EXAMPLE_BUDGET, optional=True)
        if not isinstance(self.packing, bool):
            raise bad_setting("packing", self.packing, "give true or false")
        three_way("compile", self.compile, "compiled on cuda, eager on cpu")
        choice("attention", self.attention, ("auto", *KERNEL_NAMES))
        choice("experts", self.experts, ("auto", *EXPERT_KERNELS))
        if device == "cpu" and self.attention not in ("auto", *CPU_KERNELS):
            why = "that kernel runs on cuda only; on cpu give auto, flash or math"
            raise bad_setting("attention", self.attention, why)
        choice("precision", self.compute, tuple(TORCH_NAMES))
        choice("grad_dtype", self.grad_dtype, tuple(TORCH_NAMES), none=True)
        if self.grad_dtype not in (None, "fp32") and self.compute == "fp32":
            why = "gradients accumulate in fp32 under precision 'fp32'; drop it"
            raise bad_setting("grad_dtype", self.grad_dtype, why)
        try:
            check_supported(self.precision(), device)
        except ValueError as error:
            raise bad_setting("precision", self.compute, str(error)) from None
        compiled = device == "cuda" if self.compile is None else self.compile
        if compiled and device == "cpu" and not any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "c++")):
            why = "compiling for the CPU needs a C++ compiler (install g++, or set CXX), or give false"
            raise bad_setting("compile", self.compile, why)
        return replace(self, token_budget=token_budget, compile=compiled)

    def kernels(self) -> dict:
        """What a checked section tells the engine about its kernels (``Engine``'s arguments)."""
        return {"packed": self.packing, "compiled": bool(self.compile), "attention": self.attention}

    def precision(self) -> Precision:
        """The ``Precision`` a checked section trains in."""
        return Precision.of(self.compute, self.grad_dtype)

    def check_budget(self, model: ModelConfig, plan: HotSwitchPlan, max_len: int) -> None:
        """A declared ``memory_budget`` must exceed the model states of each strategy of ``plan``,
        each sent sequences up to its bucket's upper bound (``planning.memory.check_budget_holds_states``);
        None declares no budget."""
        if self.memory_budget is None:
            return
        longest = {bucket.strategy: upper for bucket, upper in plan.reach(max_len)}
        try:
            check_budget_holds_states(model, longest, self.memory_budget, self.precision())
        except ValueError as error:
            raise bad_setting("memory_budget", self.memory_budget, str(error)) from None
