"""``skip_default_init``: build modules without running their own ``reset_parameters``.

A module's constructor initialises its parameters (``nn.Linear`` with Kaiming-uniform,
``nn.Embedding`` with a normal draw). This project sets every parameter itself
(``llama.init_param``), so that work is wasted, and on the ``meta`` device it is worse than
wasted: PyTorch runs those draws through its Python reference kernels, whose first call
imports ``torch._dynamo`` (about two CPU seconds in every rank that traces a model). Under
this mode every ``torch.nn.init`` call returns its tensor untouched, so parameters hold
whatever their allocation held until they are set.
"""

from __future__ import annotations

import torch.nn.init
from torch.overrides import TorchFunctionMode


class skip_default_init(TorchFunctionMode):
    """``with skip_default_init(): model = Module(...)``: ``torch.nn.init`` calls do nothing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == torch.nn.init.__name__:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))
