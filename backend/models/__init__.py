"""Model definitions: configs (shapes) and, in plain torch, the LLaMA-style decoder."""

from hotswitch.backend.models.config import CONFIGS, ModelConfig, get_config

__all__ = ["CONFIGS", "ModelConfig", "get_config"]
