"""One module per ``hotswitch`` subcommand, each with ``add_parser(sub)`` and ``run(args)``."""
