"""Model definitions: configs (shapes, no torch needed) and the LLaMA-style decoder in plain torch."""

from hotswitch.backend.exports import lazy_exports

_EXPORTS = {
    "CONFIGS": "hotswitch.backend.models.config",
    "ModelConfig": "hotswitch.backend.models.config",
    "get_config": "hotswitch.backend.models.config",
    "IGNORE": "hotswitch.backend.models.llama",
    "Transformer": "hotswitch.backend.models.llama",
    "build_model": "hotswitch.backend.models.llama",
    "init_param": "hotswitch.backend.models.llama",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
