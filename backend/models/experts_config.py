"""A mixture of experts' shape and router (``ModelConfig.experts``), as each family's
``config.json`` gives it (``hf_config_moe``); ``models.experts`` computes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scoring = Literal["softmax", "sigmoid"]


@dataclass(frozen=True)
class Experts:
    """A mixture of experts in place of the feed-forward of ``layers`` (empty: every layer): a
    router (a linear map to ``count`` scores) picks each token's ``per_token`` experts (top-k),
    each a SwiGLU of width ``ffn_dim``; their outputs are summed weighted by the picked scores,
    renormalised to sum to one where ``normalize`` (Qwen3-MoE's and OLMoE's ``norm_topk_prob``,
    always in Mixtral), then times ``scale``. Dropless: every token reaches its experts.

    The scores are a softmax over the experts (Qwen, OLMoE, Mixtral), or each expert's sigmoid
    (``scoring="sigmoid"``: GLM-4.5, DeepSeek-V3). With ``score_bias``, a per-expert bias is
    added to the scores for the choice only (``e_score_correction_bias``: read from the
    checkpoint, held fixed in training as transformers holds it). With ``groups`` above 1
    (``n_group``), the experts fall into that many groups and a token picks among the experts of
    its ``group_pick`` best groups (``topk_group``), a group ranked by the sum of its two best
    scores.

    A shared expert (``shared_ffn_dim`` above 0: Qwen2-MoE, GLM-4.5, DeepSeek) is a SwiGLU of that
    width that every token passes through, its output added to the routed one, scaled by
    sigmoid(a linear map of the token to one score) where ``shared_gate`` (Qwen2-MoE's
    ``shared_expert_gate``)."""

    count: int
    per_token: int
    ffn_dim: int
    normalize: bool = False
    layers: tuple[int, ...] = ()
    shared_ffn_dim: int = 0
    shared_gate: bool = False
    # the load-balancing auxiliary loss's weight in the loss, 0 for none (transformers'
    # router_aux_loss_coef where output_router_logits): ``models.balance``
    aux_loss_coef: float = 0.0
    scoring: Scoring = "softmax"
    score_bias: bool = False
    groups: int = 1
    group_pick: int = 1
    scale: float = 1.0  # routed_scaling_factor

    def routes(self, layer: int) -> bool:
        """Whether ``layer``'s feed-forward is this mixture (else a dense one)."""
        return not self.layers or layer in self.layers

    def routed_layers(self, n_layers: int) -> int:
        """How many of ``n_layers`` layers route."""
        return sum(self.routes(i) for i in range(n_layers))

    def check(self, name: str) -> None:
        """Refuse a mixture the router cannot compute, naming the fix."""
        if not 0 < self.per_token <= self.count:
            raise ValueError(
                f"{name}: {self.per_token} experts per token of {self.count}; give between 1 and the count"
            )
        if self.scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"{name}: router scoring {self.scoring!r}; the router computes softmax or sigmoid")
        if self.groups < 1 or self.count % self.groups or (self.groups > 1 and self.count // self.groups < 2):
            raise ValueError(
                f"{name}: {self.count} experts in {self.groups} groups; give groups dividing the count into groups "
                "of two or more experts"
            )
        if not 0 < self.group_pick <= self.groups or self.per_token > self.group_pick * self.count // self.groups:
            raise ValueError(
                f"{name}: {self.per_token} experts per token from the best {self.group_pick} of {self.groups} "
                "groups; give group_pick between 1 and groups, its groups holding at least per_token experts"
            )
        if self.aux_loss_coef and self.scoring != "softmax":
            raise ValueError(
                f"{name}: a load-balancing auxiliary loss (router_aux_loss_coef={self.aux_loss_coef}) over "
                "sigmoid scores is not computed (transformers adds none for these families, which balance "
                "by score_bias); give router_aux_loss_coef 0"
            )
