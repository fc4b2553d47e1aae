"""Attention's kernels: which of PyTorch's fused kernels runs causal attention, chosen by
measurement on the device (``kernels``; their names without torch, ``names``), and how a packed
row attends its documents in one call, flash's variable-length kernel (``varlen``) or
FlexAttention with a block mask (``flex``), each put in force only where it agrees with one
fused call per document (``agreement``). The attention call itself is the model's
(``models.llama.causal_attention``); documents' positions are ``models.documents``."""
