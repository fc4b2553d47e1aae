"""Model definitions: configs (shapes) and the LLaMA-style decoder in plain torch."""

from hotswitch.backend.models.config import CONFIGS, ModelConfig, get_config
from hotswitch.backend.models.llama import IGNORE, Transformer, build_model, init_param

__all__ = ["CONFIGS", "IGNORE", "ModelConfig", "Transformer", "build_model", "get_config", "init_param"]
