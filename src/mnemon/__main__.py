"""``python -m mnemon …``: the same as the ``mnemon`` console script."""

from .orchestrator.cli import console

if __name__ == "__main__":
    console()
