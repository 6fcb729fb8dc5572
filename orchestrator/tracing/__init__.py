"""Traces of a run in the OpenTelemetry GenAI conventions: ``invoke_agent``, ``chat`` and
``execute_tool`` spans, built from the records an agent's log holds.

One pure builder (``build.TraceBuilder``) turns records into spans. ``mnemon trace RUN_ROOT``
feeds it a finished run's logs (``runlogs``) and prints OTLP/JSON or sends it (``otlp``,
``send``); a live run feeds it every record as it is appended (``live``, with the ``otel``
extra), so a live trace and one exported later carry the same ids. Nothing here imports
OpenTelemetry but ``live``, and only once tracing is on (``switch``).
"""
