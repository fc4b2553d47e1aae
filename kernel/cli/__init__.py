"""The ``hotswitch`` command line (``main``): one module per subcommand, each with
``add_parser(sub)`` and ``run(args)``, and the terminal progress they share."""
