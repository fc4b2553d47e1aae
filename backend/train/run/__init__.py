"""The run description: one typed run configuration (TOML, flags, dict), every setting checked
before launch (spec), and the recipe that builds a trainer from it on every rank."""
