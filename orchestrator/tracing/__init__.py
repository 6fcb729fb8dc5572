"""Traces of a run in the OpenTelemetry GenAI conventions: ``invoke_agent``, ``chat`` and
``execute_tool`` spans, built from the records an agent's log holds.

One pure builder (``build.TraceBuilder``) turns records into spans. ``mnemon trace RUN_ROOT``
feeds it a finished run's logs (``runlogs``) and prints OTLP/JSON (``otlp``) or sends OTLP
protobuf (``protobuf``, ``send``); a live run feeds it every record as it is appended (the tap,
``tap``; turned on by ``switch``) and sends what it finishes (``ship``), so a live trace and one
exported later carry the same ids. Nothing here imports OpenTelemetry but ``live``, the bridge to
a program's own SDK pipeline (the ``otel`` extra), which the commands never import.
"""
