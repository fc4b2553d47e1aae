"""Where the public API is: the packages whose ``__all__`` a user imports from. Notebooks, the
README and the docs import only these names (``tests/test_public_api.py``), and the docs'
API reference lists them; every other module is internal and may move."""

PUBLIC = (
    "hotswitch.backend",
    "hotswitch.backend.data",
    "hotswitch.backend.models",
    "hotswitch.backend.sim",
    "hotswitch.backend.sim.paper",
    "hotswitch.widgets",
    "hotswitch.kernel",
)
