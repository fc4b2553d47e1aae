from hypothesis import settings

# CI must not flake: the same examples every run (plus hypothesis' explicit database-free search).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile("ci")
