"""The batch engine: a job's agent turns requested through the providers' batch APIs, in waves.

``mnemon run JOB.toml --engine batch`` (or ``[provider] batch = true``). Every agent of the job
runs its ordinary loop; its provider is a ``waves.BatchProvider`` whose ``complete`` puts the
request into the current wave and waits for its row. A driver submits the wave once every live
agent is waiting on a batch or on its children, polls, keeps the results in the run root, and
hands each row back as the turn's response (decision 0295). ``ids`` names requests, ``journal``
keeps the run root's record of batches; the engine's face, which wires it into ``mnemon run`` and
the service, is ``orchestrator/engines/batch.py`` (``job`` re-exports it for one release).
"""
