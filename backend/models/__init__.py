"""Model definitions: configs (shapes, no torch needed) and the LLaMA-style decoder in plain torch."""

import importlib

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hotswitch.backend.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
