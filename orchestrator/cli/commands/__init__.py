"""One module per CLI command: each has ``add_parser(subparsers)`` and ``run(args) -> int``.

Who may import these: ``mnemon.orchestrator.cli`` alone, one command at a time (the one being
run, or all of them for ``--help`` output); never the library (``tests/test_knots.py``).
"""
