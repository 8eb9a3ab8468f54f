"""One module per ``artimon`` subcommand, each with ``configure(parser)`` and ``run(args)``."""
