"""The run configuration: one typed tree of settings (``run_config.RunConfig``), nested by
component, each section a dataclass that checks itself with messages naming the fix. TOML, the
command line's flags and Python (a flat dict or the tree) all build it. The package itself imports
nothing: the kernel's launchers read ``paths`` without loading torch."""
