"""A training step's parts as named ranges in PyTorch's profiler (``record_function``), so a
trace (or ``benchmarks/breakdown.py``'s account of the device's idle time) tells what the host
was doing while the device waited. Outside a profile a range costs a few microseconds."""

from __future__ import annotations

INPUTS = "hotswitch.inputs"  # a micro-batch collated and moved to the device, as the schedule reaches it
FORWARD = "hotswitch.forward"  # one micro-batch's forward pass on one stage
BACKWARD = "hotswitch.backward"  # its backward pass
UPDATE = "hotswitch.update"  # the gradients' norm, clipping, AdamW and the compute copy refreshed
DOCUMENT_MASK = "hotswitch.document_mask"  # FlexAttention's block mask of a micro-batch's documents
