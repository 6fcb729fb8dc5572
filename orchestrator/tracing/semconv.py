"""The names of the OpenTelemetry GenAI semantic conventions that mnemon's spans carry, and the
version they follow.

Pinned: the GenAI conventions as published with semantic-conventions v1.44.0 (the schema URL
below; the Python ``opentelemetry-semantic-conventions`` 0.66b2 names every attribute used here).
``OTEL_SEMCONV_STABILITY_OPT_IN`` is honoured as those conventions ask of an instrumentation:
with ``gen_ai_latest_experimental`` in it, only the latest names are emitted; without it, the
names that v1.36.0 and earlier used are emitted beside them (``gen_ai.system`` beside
``gen_ai.provider.name``), so a backend that still reads the old name finds it (decision 0291).
"""

from __future__ import annotations

import os

SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
SCOPE = "mnemon"
OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM_OLD = "gen_ai.system"  # v1.36.0 and earlier: the provider's name
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"  # all input: uncached + cache read + cache write
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"  # of the output, where a provider says
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"  # content: only with --trace-content
TOOL_RESULT = "gen_ai.tool.call.result"  # content
INPUT_MESSAGES = "gen_ai.input.messages"  # content
OUTPUT_MESSAGES = "gen_ai.output.messages"  # content
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"  # content
ERROR_TYPE = "error.type"

#: span kinds as OTLP numbers them
INTERNAL, CLIENT = 1, 3
#: status codes as OTLP numbers them
UNSET, OK, ERROR = 0, 1, 2

#: mnemon's provider names → ``gen_ai.provider.name`` (well-known values where there is one)
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai",
             "bedrock": "aws.bedrock", "vertex": "gcp.vertex_ai",
             # the conventions' values for Google's and Azure's surfaces (issue #48)
             "gemini": "gcp.gemini",
             "azure-openai": "azure.ai.openai", "azure-openai-responses": "azure.ai.openai"}


def latest_only(environ: "os._Environ[str] | dict[str, str] | None" = None) -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for the latest GenAI names alone (a
    comma-separated list, as the conventions define it)."""
    value = (os.environ if environ is None else environ).get(OPT_IN, "")
    return LATEST in {v.strip() for v in value.split(",")}


def provider_name(name: str | None) -> str:
    """``gen_ai.provider.name`` of a provider as mnemon records it (``SessionStarted.provider``):
    the conventions' value where there is one, else mnemon's own name (``scripted``)."""
    if not name:
        return "mnemon"
    return PROVIDERS.get(name, name)
