"""A packed row's attention in one kernel call: FlexAttention with a block mask of the row's
documents (a query sees the keys at or before it in its own document), compiled by
``torch.compile`` as FlexAttention needs to be fast. Blocks that straddle no document
boundary and lie under the diagonal run unmasked; blocks across documents are skipped whole.
Which blocks are which is read off the documents' boundaries on the host (``document_blocks``),
not by ``create_block_mask``, which evaluates the mask at every (query, key) pair on the device:
a 16K-token row's 268M pairs, several GB of memory traffic and transient memory a micro-batch.

On an H200, attention forward and backward over a 66K-token batch of RefinedWeb-like documents
took 10.6 ms this way against 15.2 ms as padded rows through flash attention (issue 40's
measurement). PyTorch runs FlexAttention's backward on GPUs only, so on the CPU packed rows keep
one fused call per document (``documents.per_document``), which is exact everywhere; the choice
between the two on a GPU is measured (``attention.kernels.choose``).
"""

from __future__ import annotations

from functools import cache

import torch
from torch.profiler import record_function

from hotswitch.backend.models.documents import NewestMicroBatch
from hotswitch.backend.runtime.profile_ranges import DOCUMENT_MASK

_MASKS = NewestMicroBatch()
BLOCK = 128  # FlexAttention's default block size, in queries and in keys


def flex_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim] that never crosses a document of
    ``positions`` [batch, seq] (on the host), in one FlexAttention call; k and v may have fewer
    heads (grouped-query attention)."""
    mask = document_mask(positions, q.device)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    out = _compiled_flex()(q, k, v, block_mask=mask, enable_gqa=q.shape[1] != k.shape[1])
    return out.transpose(1, 2)


def document_mask(positions: torch.Tensor, device: torch.device):
    """The block mask of ``positions``' documents, causal, built once a micro-batch (every
    layer reads the same one)."""
    from torch.nn.attention.flex_attention import BlockMask

    def build():
        with record_function(DOCUMENT_MASK):
            numbers = (positions == 0).cumsum(-1)  # a document's number in its row, on the host
            documents = numbers.to(device, non_blocking=True)

            def causal_in_document(b, h, q_index, kv_index):
                return (q_index >= kv_index) & (documents[b, q_index] == documents[b, kv_index])

            counts, indices, full_counts, full_indices = (
                t.to(device, non_blocking=True) for t in document_blocks(numbers)
            )
            length = positions.shape[1]
            return BlockMask.from_kv_blocks(
                counts,
                indices,
                full_counts,
                full_indices,
                BLOCK_SIZE=BLOCK,
                mask_mod=causal_in_document,
                seq_lengths=(length, length),
            )

    return _MASKS.get(positions, str(device), build)


def document_blocks(numbers: torch.Tensor) -> list[torch.Tensor]:
    """FlexAttention's kv block lists of the causal mask within documents, from each token's
    document number (``numbers`` [rows, length], non-decreasing along a row), read off each
    block's first and last document on the host: ``create_block_mask`` would evaluate the
    mask at every (query, key) pair on the device, a [length x length] tensor a micro-batch.
    A key block is partial where its documents reach the query block's (the diagonal always),
    full where one document covers both blocks whole; the lists are ordered as
    ``create_block_mask`` orders them."""
    rows, length = numbers.shape
    starts = torch.arange(0, length, BLOCK)
    whole = starts + BLOCK <= length  # a block cut short by the row's end is never full
    first = numbers[:, starts]
    last = numbers[:, (starts + BLOCK).clamp(max=length) - 1]
    q = torch.arange(len(starts))[:, None]
    kv = torch.arange(len(starts))[None, :]
    below = (kv < q).expand(rows, -1, -1)
    full = below & (first[:, None, :] == last[:, :, None]) & whole[None, :, None] & whole[None, None, :]
    partial = (below & (last[:, None, :] >= first[:, :, None]) | (kv == q)) & ~full
    return [*_ordered(partial[:, None]), *_ordered(full[:, None])]


def _ordered(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A [rows, 1, q blocks, kv blocks] map as (blocks per query block, their kv indices first)."""
    dense = blocks.to(torch.int32)
    order = torch.argsort(dense, dim=-1, descending=True, stable=True)
    return dense.sum(-1).to(torch.int32), order.to(torch.int32)


@cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)
