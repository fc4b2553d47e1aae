"""Published measurements the simulator is calibrated on: step times of the Megatron-LM runs the
HotSPa authors benchmarked. The document lengths those runs counted are the dataset model's
(``sim.datasets.REFINEDWEB_*``), which the library draws batches from.

Source: the authors' Megatron-LM fork, public repository ``Sakura-gh/Megatron-LM``, branch
``sync_files``, folder ``benchmark/logs/`` (runs of 2024-02, 8 and 16 x H800-80G, bf16, global
batch 512 RefinedWeb documents, ``--sequence-packing``, distributed optimizer, no recompute).
Each step time is the median of the logged "elapsed time per iteration" after the first logged
interval, for the (layout, MBS) named; the header line of each run in the log reads
``7b, 4k, gbs=512: dp=1, tp=4, pp=2, mbs=16``. Read by this project on 2026-11-25; nothing here
was tuned.
"""

from __future__ import annotations

from dataclasses import dataclass

LOGS = "github.com/Sakura-gh/Megatron-LM, branch sync_files, benchmark/logs/"


@dataclass(frozen=True)
class MeasuredStep:
    """One logged Megatron-LM run: ``packed`` (``--sequence-packing``) or padded to ``context``."""

    model: str
    gpus: int
    context: int
    dp: int
    tp: int
    pp: int
    mbs: int
    packed: bool
    step_s: float
    log: str  # path under LOGS

    @property
    def name(self) -> str:
        how = "packed" if self.packed else "padded"
        return (
            f"{self.model}/{self.gpus}gpu/{self.context // 1024}k dp{self.dp}tp{self.tp}pp{self.pp} mbs{self.mbs} {how}"
        )


# The points the device model is fitted on (7B on one 8 x H800 server: each sweep's best run)
# and the points it must then predict (another model, a second server, padding at 8K).
FIT = (
    MeasuredStep("7b", 8, 4096, 1, 4, 2, 16, True, 6.34, "gpus8/7b/4k_packing_gbs512.log"),
    MeasuredStep("7b", 8, 8192, 1, 4, 2, 8, True, 9.03, "gpus8/7b/8k_packing_gbs512.log"),
    MeasuredStep("7b", 8, 16384, 1, 4, 2, 4, True, 14.98, "gpus8/7b/16k_packing_gbs512.log"),
    MeasuredStep("7b", 8, 4096, 8, 1, 1, 1, False, 25.87, "gpus8/7b/4k_padding_gbs512.log"),
    MeasuredStep("7b", 8, 16384, 2, 2, 2, 1, False, 155.6, "gpus8/7b/16k_padding_gbs512.log"),
)
HELD_OUT = (
    MeasuredStep("7b", 8, 8192, 4, 1, 2, 1, False, 60.13, "gpus8/7b/8k_padding_gbs512.log"),
    MeasuredStep("13b", 8, 4096, 1, 2, 4, 4, True, 12.71, "gpus8/13b/4k_packing_gbs512.log"),
    MeasuredStep("13b", 8, 8192, 1, 2, 4, 2, True, 19.19, "gpus8/13b/8k_packing_gbs512.log"),
    MeasuredStep("7b", 16, 4096, 4, 2, 2, 8, True, 3.61, "gpus16/7b/4k_packing_gbs512.log"),
    MeasuredStep("7b", 16, 16384, 1, 8, 2, 8, True, 8.86, "gpus16/7b/16k_packing_gbs512_node1.log"),
)
