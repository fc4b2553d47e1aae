"""The run: its edge (``spec``: a flat dict, a ``RunConfig`` or a TOML file, checked before
launch against ``backend.train.config``) and the recipe that builds a trainer from the checked
configuration on every rank."""
