"""The `kvviz` subcommands, one module each with `configure(parser)` and `run(args) -> int`; kvviz.cli
dispatches to them. What kvviz *does* from a terminal; the library they use (config, trace, caches,
engines, models, memory, estimate, ...) is in the package above. The two commands that need Qt,
`gui` and `shot`, live with the window in kvviz.ui (app.py, shot.py)."""
