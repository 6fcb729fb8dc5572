"""Scores: a job's answers graded against targets, summarised with honest intervals, and runs
compared per dollar (``docs/scores.md``).

``spec`` the ``[[score]]`` tables, ``scorers`` each kind (pure), ``judge`` what a ``model``
scorer's judge is asked and answers, ``stats`` means, standard errors and 95 % intervals,
``summary`` a run's summary and a comparison of runs. The I/O — scoring a run root's rows,
running judges as agents — is ``jobs/scoring.py``; the commands ``mnemon score``, ``mnemon
compare`` and ``mnemon results --summary``.
"""

from __future__ import annotations
