"""``mnemon trace RUN_ROOT [--json | --endpoint URL]`` — a whole run's OpenTelemetry spans, read
from its logs: OTLP/JSON on stdout, or sent to an OTLP/HTTP receiver.

Read-only. Not a run root: one line, exit 2; a receiver that cannot be reached or refuses: one
line, exit 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ....lineage.view import report_torn

from .. import COMMANDS
from ....errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help=COMMANDS["trace"])
    p.add_argument("path", metavar="RUN_ROOT", help="a run root")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help="print the spans as OTLP/JSON (an ExportTraceServiceRequest)")
    out.add_argument("--endpoint", default=None, metavar="URL",
                     help="send them to this OTLP/HTTP receiver (default: "
                          "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT)")
    p.add_argument("--encoding", default="auto", choices=["auto", "protobuf", "json"],
                   help="the body sent (default protobuf, which every receiver takes)")
    p.add_argument("--trace-content", action="store_true",
                   help="record message content (prompts, answers, tool arguments and results)")


def run(args) -> int:
    from ...tracing import semconv
    from ...tracing.otlp import request, resource_attributes
    from ...tracing.runlogs import read_run

    endpoint = args.endpoint
    if not args.json and endpoint is None:
        endpoint = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
        if not endpoint:
            raise UserError("trace needs --json or --endpoint URL (or "
                            "OTEL_EXPORTER_OTLP_ENDPOINT set)")
    trace = read_run(Path(args.path), content=args.trace_content,
                     latest_only=semconv.latest_only())
    for src, torn in trace.torn.items():
        report_torn(src, torn)
    resource = resource_attributes(extra={"mnemon.run.created_at":
                                          str(trace.run.get("created_at", ""))})
    if args.json:
        json.dump(request(trace.spans, resource), sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
        return 0
    from ...tracing.send import send

    send(trace.spans, resource, endpoint, encoding=args.encoding)
    sys.stderr.write(f"mnemon: {len(trace.spans)} spans sent to {endpoint}\n")
    return 0
