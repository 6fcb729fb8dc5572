"""
The price table and the cost of a Usage (pure).

Prices are USD per 1M tokens, list prices taken on 2026-11-30 from the providers' published
pricing pages (Anthropic: platform.claude.com/docs/en/about-claude/pricing; OpenAI:
openai.com/api/pricing), as quoted by pages that cite them. Anthropic bills a cache read at
0.1× input and a cache write at 1.25× (5-minute TTL) or 2× (1-hour TTL); OpenAI bills cached
input at its own "cached input" price and has no write surcharge, so its writes are priced as
input (and its API reports none anyway).

Batches (Anthropic's Message Batches, OpenAI's Batch API) cost half: every price of the model,
input, output, cache reads and cache writes alike (Anthropic: "the batch discount and the prompt
caching multipliers stack"; OpenAI's batch column halves cached input too). A model name ending
``@batch`` (``claude-sonnet-4-5@batch``) is priced so: the batch engine records its calls under
that name, so that a log says by itself which spend was batch (decision 0297).

Override with ``load_prices(path)`` (TOML or JSON) or ``prices_from(mapping)``::

    [models."my-finetune"]
    input = 2.0
    output = 8.0
    cache_read = 0.5          # optional; default 0.1 × input
    cache_write_5m = 2.0      # optional; default 1.25 × input
    cache_write_1h = 2.0      # optional; default 2 × input
    batch = 0.5               # optional; a batched request's share of each price
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from .. import _toml as toml
from ..session.records import Usage

__all__ = [
    "PRICES_DATE",
    "GEMINI_SOURCE",
    "AZURE_SOURCE",
    "NO_WRITE_SURCHARGE",
    "BATCH_DISCOUNT",
    "BATCH_SUFFIX",
    "Price",
    "batch_model",
    "is_batch",
    "PRICES",
    "DEFAULT_PRICE",
    "price_for",
    "prices_from",
    "load_prices",
    "cost_usd",
    "cloud_model",
    "REGIONAL_PREMIUM",
    "SweepGate",
    "sweep_gate",
]

PRICES_DATE = "2026-11-30"


class Price(Struct, frozen=True, kw_only=True):
    """USD per 1M tokens."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    batch: float = 0.5
    """What a batched request pays, as a share of each price above (its provider's discount)."""

    def batched(self) -> "Price":
        """The prices of a batched request: every price times ``batch``."""
        b = self.batch
        return Price(input=self.input * b, output=self.output * b,
                     cache_read=self.cache_read * b, cache_write_5m=self.cache_write_5m * b,
                     cache_write_1h=self.cache_write_1h * b, batch=1.0)


BATCH_DISCOUNT = {"anthropic": 0.5, "openai": 0.5, "gemini": 0.5}
"""Each provider's batch price as a share of its live price, per token kind (Anthropic: Message
Batches pricing; OpenAI: the Batch column of its pricing page), on 2026-11-30."""
BATCH_SUFFIX = "@batch"


def is_batch(model: str | None) -> bool:
    """Whether a priced model name is a batch one (``…@batch``)."""
    return bool(model) and model.endswith(BATCH_SUFFIX)  # type: ignore[union-attr]


def batch_model(model: str | None) -> str:
    """The name a batched request of ``model`` is priced as (``None``: the default price)."""
    base = model or "default"
    return base if is_batch(base) else base + BATCH_SUFFIX


def anthropic(input: float, output: float) -> Price:
    """An Anthropic price: read 0.1×, write 1.25× (5 min) or 2× (1 h) the input price."""
    return Price(input=input, output=output, cache_read=round(input * 0.1, 6),
                 cache_write_5m=round(input * 1.25, 6), cache_write_1h=round(input * 2.0, 6),
                 batch=BATCH_DISCOUNT["anthropic"])


def openai(input: float, cached: float, output: float) -> Price:
    """An OpenAI price: cached input at its own price, writes priced as plain input."""
    return Price(input=input, output=output, cache_read=cached, cache_write_5m=input,
                 cache_write_1h=input, batch=BATCH_DISCOUNT["openai"])


GEMINI_SOURCE = ("ai.google.dev/gemini-api/docs/pricing (Standard tier, prompts ≤ 200k "
                 "tokens), 2026-11-30; Vertex AI lists the same for these models")
AZURE_SOURCE = ("azure.microsoft.com/pricing/details/cognitive-services/openai-service (Global "
                "deployments), 2026-11-30")
NO_WRITE_SURCHARGE = frozenset({"openai", "openai-responses", "gemini", "azure-openai",
                                "azure-openai-responses"})
"""Providers whose prompt cache charges nothing to write: OpenAI's and Azure's automatic
caching, Gemini's implicit caching (reads at the cached-input price, writes as plain input).
``vertex`` is here only for Gemini models (``orchestrator.weighing``); Claude on Vertex bills
Anthropic's write surcharge."""


def gemini(input: float, cached: float, output: float) -> Price:
    """A Gemini price: implicit caching reads at the cached-input price, writes nothing extra;
    thinking is billed as output. Batch Mode costs half (``BATCH_DISCOUNT``)."""
    return Price(input=input, output=output, cache_read=cached, cache_write_5m=input,
                 cache_write_1h=input, batch=BATCH_DISCOUNT["gemini"])


PRICES: dict[str, Price] = {
    # Anthropic — Claude 4.x. Opus 4.5 and later dropped to $5 / $25; an Opus name the table
    # does not list falls to the "opus" family price, the current one.
    "claude-opus-4-8": anthropic(5.0, 25.0),
    "claude-opus-4-6": anthropic(5.0, 25.0),
    "claude-opus-4-5": anthropic(5.0, 25.0),
    "claude-opus-4-1": anthropic(15.0, 75.0),
    "claude-opus-4-0": anthropic(15.0, 75.0),
    "claude-opus-4-20250514": anthropic(15.0, 75.0),
    "claude-sonnet-4-6": anthropic(3.0, 15.0),
    "claude-sonnet-4-5": anthropic(3.0, 15.0),
    "claude-sonnet-4-0": anthropic(3.0, 15.0),
    "claude-sonnet-4-20250514": anthropic(3.0, 15.0),
    "claude-haiku-4-5": anthropic(1.0, 5.0),
    "claude-3-7-sonnet": anthropic(3.0, 15.0),
    "claude-3-5-haiku": anthropic(0.8, 4.0),
    "claude-3-haiku": anthropic(0.25, 1.25),
    # OpenAI — GPT-5 family, GPT-4.1, GPT-4o, o-series. (input, cached input, output)
    "gpt-5.5": openai(5.0, 0.5, 30.0),
    "gpt-5.4": openai(2.5, 0.25, 15.0),
    "gpt-5.4-mini": openai(0.75, 0.075, 4.5),
    "gpt-5.4-nano": openai(0.2, 0.02, 1.25),
    "gpt-5.2": openai(1.75, 0.175, 14.0),
    "gpt-5.1": openai(1.25, 0.125, 10.0),
    "gpt-5": openai(1.25, 0.125, 10.0),
    "gpt-5-mini": openai(0.25, 0.025, 2.0),
    "gpt-5-nano": openai(0.05, 0.005, 0.4),
    "gpt-4.1": openai(2.0, 0.5, 8.0),
    "gpt-4.1-mini": openai(0.4, 0.1, 1.6),
    "gpt-4.1-nano": openai(0.1, 0.025, 0.4),
    "gpt-4o": openai(2.5, 1.25, 10.0),
    "gpt-4o-mini": openai(0.15, 0.075, 0.6),
    "o3": openai(2.0, 0.5, 8.0),
    "o3-mini": openai(1.1, 0.55, 4.4),
    "o4-mini": openai(1.1, 0.275, 4.4),
    "o1": openai(15.0, 7.5, 60.0),
    # OpenAI — models served only by the Responses API (--provider openai-responses). The
    # Codex models are priced as their base; the -pro models have no cached-input discount.
    "gpt-5.1-codex-max": openai(1.25, 0.125, 10.0),
    "gpt-5.1-codex-mini": openai(0.25, 0.025, 2.0),
    "gpt-5.1-codex": openai(1.25, 0.125, 10.0),
    "gpt-5-codex": openai(1.25, 0.125, 10.0),
    "codex-mini-latest": openai(1.5, 0.375, 6.0),
    "gpt-5-pro": openai(15.0, 15.0, 120.0),
    "o3-pro": openai(20.0, 20.0, 80.0),
    "o1-pro": openai(150.0, 150.0, 600.0),
    # Google — Gemini, on the Gemini API and on Vertex AI alike (input, cached input, output;
    # see GEMINI_SOURCE). Prompts over 200k tokens cost more on the Pro models; the table holds
    # the ≤ 200k price.
    "gemini-3-pro": gemini(2.0, 0.2, 12.0),
    "gemini-3-flash": gemini(0.5, 0.05, 3.0),
    "gemini-2.5-pro": gemini(1.25, 0.125, 10.0),
    "gemini-2.5-flash": gemini(0.3, 0.03, 2.5),
    "gemini-2.5-flash-lite": gemini(0.1, 0.01, 0.4),
    "gemini-2.0-flash": gemini(0.1, 0.025, 0.4),
    "gemini-2.0-flash-lite": gemini(0.075, 0.075, 0.3),
    # Azure OpenAI: a deployment of an OpenAI model is priced as the model above (Azure's Global
    # deployments list OpenAI's prices; AZURE_SOURCE).
}

DEFAULT_PRICE = anthropic(3.0, 15.0)
"""For a model the table does not know (the scripted provider included): the Sonnet tier, so
that an offline run still reports what a typical run would have cost."""

_FAMILIES = (("opus", PRICES["claude-opus-4-6"]), ("sonnet", PRICES["claude-sonnet-4-5"]),
             ("haiku", PRICES["claude-haiku-4-5"]))


def price_for(model: str | None, table: Mapping[str, Price] | None = None) -> Price:
    """
    The price of ``model``: an exact name, else the longest table name it starts with (dated
    snapshots such as ``claude-sonnet-4-5-20250929`` or ``gpt-4.1-2025-04-14``), else a Claude
    family word (``opus``/``sonnet``/``haiku``), else ``DEFAULT_PRICE``. A router prefix such as
    ``anthropic/`` or ``openai/`` is ignored. A name ending ``@batch`` is the batch price of the
    name before it (``Price.batched``).
    """
    if table is None:  # the run's table: every turn prices the same few models
        hit = _PRICED.get(model) if model else None
        if hit is not None and hit[2] == len(PRICES) and (hit[1] is None
                                                          or PRICES.get(hit[1]) is hit[0]):
            return hit[0]
        table = PRICES
    if not model:
        return DEFAULT_PRICE
    if is_batch(model):
        return price_for(model[:-len(BATCH_SUFFIX)], table).batched()
    cloud = cloud_model(model)
    if cloud is not None:  # a Bedrock or Vertex id: the Claude model's price, and the region's
        return _on_cloud(cloud, table)
    name = model.rsplit("/", 1)[-1].lower()
    key: str | None = name if name in table else max(
        (k for k in table if name.startswith(k) and name[len(k):len(k) + 1] in ("-", "")),
        key=len, default=None)
    if key is not None:
        price = table[key]
    else:
        price = next((p for word, p in _FAMILIES if word in name), DEFAULT_PRICE)
    if table is PRICES:
        if len(_PRICED) >= 256:
            _PRICED.clear()
        _PRICED[model] = (price, key, len(PRICES))
    return price


_PRICED: dict[str, tuple[Price, str | None, int]] = {}
"""``price_for``'s answers on ``PRICES`` by model name, each with the table key it came from
(None: a family's or the default price) and the table's size then: an answer stands while that
key still holds the same price and no key was added or removed (``replay --prices`` updates
``PRICES``; a longer matching name added would change the answer). Bedrock, Vertex and batch
names are worked out each time (their price is derived, not a table entry)."""


# --- Claude on the clouds (decision 0403) ---------------------------------------------------
# Amazon Bedrock and Google Vertex AI list Claude at Anthropic's own prices, with the same cache
# model (a read 0.1× input, a write 1.25× for 5 minutes or 2× for 1 hour), taken on 2026-12-06
# from Anthropic's pricing page ("Third-party platform pricing") and the Bedrock pricing page.
# From the 4.5 generation on, a regional endpoint costs 10% more than the global one, every
# token kind alike: Bedrock's in-region ids and geographic profiles (``us.``, ``eu.``, ``apac.``
# …) pay it, its ``global.`` profiles do not. A Vertex model name does not say its location: a
# run records it priced as ``<model>/<location>`` (``vertex_price_name``, from
# ``GOOGLE_CLOUD_LOCATION``), a regional location paying the premium; a bare name is the global
# endpoint's (the provider's default location).
REGIONAL_PREMIUM = 1.10
_BEDROCK_ID = re.compile(r"(?:(global|[a-z]{2,4}(?:-gov)?)\.)?anthropic\.(claude-[a-z0-9.-]{1,80}?)"
                         r"(?:-v\d{1,3}(?::\d{1,3})?)?")
_VERTEX_ID = re.compile(r"(claude-[a-z0-9.-]{1,80})@(?:\d{8}|latest)(?:/([a-z0-9-]{1,40}))?")
_BEFORE_REGIONAL_PRICING = ("claude-opus-4-1", "claude-opus-4-0", "claude-opus-4-2",
                            "claude-sonnet-4-0", "claude-sonnet-4-2", "claude-3-")


def cloud_model(model: str) -> tuple[str, bool] | None:
    """A Bedrock id (``us.anthropic.claude-sonnet-4-5-20250929-v1:0``) or Vertex name
    (``claude-sonnet-4-5@20250929``) → (the Claude model, whether its endpoint is regional);
    None for any other name."""
    name = model.strip().lower()
    if m := _BEDROCK_ID.fullmatch(name):
        return m.group(2), m.group(1) != "global"
    if m := _VERTEX_ID.fullmatch(name):
        return m.group(1), m.group(2) not in (None, "global")
    return None


def vertex_price_name(model: str | None, location: str | None) -> str | None:
    """The name a Vertex run of a Claude model is priced as: ``<model>/<location>`` (what
    ``cloud_model`` reads back, a location other than ``global`` paying the regional premium);
    None for a model that is not a Vertex Claude name, or no location given (the default,
    ``global``)."""
    if not model or not location or _VERTEX_ID.fullmatch(model.strip().lower()) is None \
            or "/" in model:
        return None
    return f"{model.strip()}/{location.strip().lower()}"


def _on_cloud(cloud: tuple[str, bool], table: Mapping[str, Price]) -> Price:
    base, regional = cloud
    price = price_for(base, table)
    if not regional or base.startswith(_BEFORE_REGIONAL_PRICING):
        return price
    k = REGIONAL_PREMIUM
    return Price(input=round(price.input * k, 6), output=round(price.output * k, 6),
                 cache_read=round(price.cache_read * k, 6),
                 cache_write_5m=round(price.cache_write_5m * k, 6),
                 cache_write_1h=round(price.cache_write_1h * k, 6), batch=price.batch)


def prices_from(mapping: Mapping[str, Any], base: Mapping[str, Price] | None = None
                ) -> dict[str, Price]:
    """
    A price table: ``base`` (the built-in table by default) overlaid with ``mapping``, whose
    entries give ``input`` and ``output`` and optionally ``cache_read``, ``cache_write_5m``,
    ``cache_write_1h`` (defaults 0.1×, 1.25×, 2× input). ``mapping`` may hold them under a
    ``models`` key.
    """
    table = dict(PRICES if base is None else base)
    entries = mapping.get("models", mapping)
    for name, fields in entries.items():
        if isinstance(fields, Price):
            table[name] = fields
            continue
        try:
            inp = float(fields["input"])
            out = float(fields["output"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"price for {name!r} needs numeric 'input' and 'output'") from exc
        table[name] = Price(
            input=inp, output=out,
            cache_read=float(fields.get("cache_read", inp * 0.1)),
            cache_write_5m=float(fields.get("cache_write_5m", inp * 1.25)),
            cache_write_1h=float(fields.get("cache_write_1h", inp * 2.0)),
            batch=float(fields.get("batch", 0.5)),
        )
    return table


def load_prices(path: str | Path, base: Mapping[str, Price] | None = None) -> dict[str, Price]:
    """The built-in table overlaid with a TOML (``.toml``) or JSON file."""
    path = Path(path)
    mapping = toml.load(path) if path.suffix == ".toml" else json.loads(path.read_bytes())
    return prices_from(mapping, base)


def cost_usd(usage: Usage, model: str | None, ttl: str = "5m",
             table: Mapping[str, Price] | None = None) -> float:
    """What ``usage`` costs on ``model``; cache writes at the 5-minute or 1-hour price."""
    return cost_at(price_for(model, table), usage, ttl)


def cost_at(p: Price, usage: Usage, ttl: str = "5m") -> float:
    """What ``usage`` costs at the price ``p`` (``cost_usd`` once the model's price is found: a
    caller that prices many calls of one model finds it once)."""
    write = p.cache_write_1h if ttl == "1h" else p.cache_write_5m
    return (usage.input_tokens * p.input + usage.output_tokens * p.output
            + usage.cache_read_tokens * p.cache_read + usage.cache_write_tokens * write) / 1e6


def __getattr__(name: str) -> Any:
    """``SweepGate`` and ``sweep_gate``, kept one release: the sweep gate's arithmetic is
    ``mnemon.session.sweep.Gate`` (``Gate(R, S, w, r)`` takes the same arguments), the one copy
    the harness runs (docs/changelog-names.md)."""
    if name in ("SweepGate", "sweep_gate"):
        from ..session.sweep import Gate

        return Gate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
