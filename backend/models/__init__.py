"""Model definitions: configs (shapes, no torch needed), the LLaMA-style decoder in plain torch,
and Hugging Face checkpoints of the families that load in and out of it (``hf``)."""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    "CONFIGS": "hotswitch.backend.models.config",
    "ModelConfig": "hotswitch.backend.models.config",
    "get_config": "hotswitch.backend.models.config",
    "IGNORE": "hotswitch.backend.data.tokenizer",
    "Transformer": "hotswitch.backend.models.llama",
    "build_model": "hotswitch.backend.models.llama",
    "init_param": "hotswitch.backend.models.llama",
    "config_from_hf": "hotswitch.backend.models.hf",
    "hf_initializer": "hotswitch.backend.models.hf",
    "load_pretrained": "hotswitch.backend.models.hf",
    "save_pretrained": "hotswitch.backend.models.hf",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
