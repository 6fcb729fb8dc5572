"""
Azure OpenAI: OpenAI's two wires (``providers.openai``, ``providers.openai_responses``) at
Azure's URLs with Azure's credentials. Nothing of the body or the answer differs, so each
provider here is the OpenAI adapter with its URL and headers replaced (decision 0411):

- ``azure-openai`` — Chat Completions at a deployment:
  ``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version={version}``; the
  deployment is ``--model`` (a request's own model names another deployment).
- ``azure-openai-responses`` — the Responses API of Azure's v1 surface,
  ``{endpoint}/openai/v1/responses``, with the deployment as the body's ``model`` (the v1
  surface takes no ``api-version``).

The credential is an ``api-key`` header (``AZURE_OPENAI_API_KEY``) or an Entra ID bearer token
(``AZURE_OPENAI_AD_TOKEN``, obtained by the caller, e.g. ``az account get-access-token
--resource https://cognitiveservices.azure.com``); a token wins when both are set. Azure's
Chat stream opens with a chunk of ``prompt_filter_results`` and no choices, which the OpenAI
assembler passes over; a ``content_filter`` finish is recorded as a refusal.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from .base import Request
from .openai import OpenAIProvider
from .openai_responses import ResponsesProvider

__all__ = ["API_VERSION", "AzureOpenAIProvider", "AzureResponsesProvider", "azure_headers",
           "deployment_hint"]

API_VERSION = "2024-10-21"
"""The latest generally available data-plane ``api-version`` of Azure's Chat Completions, used
when ``OPENAI_API_VERSION`` is not set."""


def azure_headers(api_key: str, ad_token: str | None) -> dict[str, str]:
    """JSON in and out, and the credential: a bearer Entra ID token, else the ``api-key``."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    if ad_token:
        headers["authorization"] = f"Bearer {ad_token}"
    elif api_key:
        headers["api-key"] = api_key
    return headers


def deployment_hint(endpoint: str, status: int, deployment: str | None) -> str | None:
    """A 404's likely cause: Azure answers 404 for a deployment the resource does not have, or
    for an endpoint given with a path of its own."""
    if status != 404:
        return None
    if urlsplit(endpoint).path.strip("/"):
        return "the endpoint is the resource's root (https://NAME.openai.azure.com), with no path"
    if deployment:
        return (f"no deployment named {deployment!r} answered: --model takes the deployment's "
                "name, which may differ from the model's")
    return None


class AzureOpenAIProvider(OpenAIProvider):
    """
    Chat Completions on an Azure OpenAI deployment.

    Args:
        endpoint: the resource's root, ``https://NAME.openai.azure.com`` (``--base-url``).
        api_key: sent as ``api-key``; ad_token, when given, is sent instead as a bearer token.
            Neither is logged, recorded or shown in ``repr``.
        model: the deployment's name.
        api_version: the ``api-version`` query parameter.
        (the rest as ``OpenAIProvider``)
    """

    name = "azure-openai"

    def __init__(self, client: Any, api_key: str, model: str, *, endpoint: str,
                 api_version: str = API_VERSION, ad_token: str | None = None,
                 **kw: Any) -> None:
        kw.setdefault("max_tokens_field", "max_completion_tokens")
        super().__init__(client, api_key, model, base_url=endpoint, **kw)
        self.api_version = api_version
        self._ad_token = ad_token

    def _deployment_url(self, deployment: str) -> str:
        return (f"{self.base_url}/openai/deployments/{quote(deployment, safe='.-_')}"
                f"/chat/completions?api-version={quote(self.api_version, safe='-')}")

    @property
    def url(self) -> str:
        return self._deployment_url(self.model)

    def url_for(self, request: Request) -> str:
        return self._deployment_url(request.model or self.model)

    def _headers(self) -> dict[str, str]:
        return azure_headers(self._api_key, self._ad_token)

    def hint(self, status: int) -> str | None:
        return deployment_hint(self.base_url, status, self.model)


class AzureResponsesProvider(ResponsesProvider):
    """
    The Responses API on Azure's v1 surface: ``{endpoint}/openai/v1/responses``, the
    deployment as ``model``. Stateless by default, as ``ResponsesProvider``.

    Args:
        endpoint: the resource's root (``--base-url``).
        api_key, ad_token: as ``AzureOpenAIProvider``.
        (the rest as ``ResponsesProvider``)
    """

    name = "azure-openai-responses"

    def __init__(self, client: Any, api_key: str, model: str, *, endpoint: str,
                 ad_token: str | None = None, **kw: Any) -> None:
        super().__init__(client, api_key, model, base_url=endpoint, **kw)
        self._ad_token = ad_token

    @property
    def url(self) -> str:
        return f"{self.base_url}/openai/v1/responses"

    def _headers(self) -> dict[str, str]:
        return azure_headers(self._api_key, self._ad_token)

    def hint(self, status: int) -> str | None:
        return deployment_hint(self.base_url, status, self.model)
