"""``python -m mnemon …``: the same as the ``mnemon`` console script."""

import sys

from .orchestrator.cli import main

if __name__ == "__main__":
    sys.exit(main())
