"""Hypothesis strategies: schemas of the output-type subset, and JSON values."""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "b", "c", "name", "size", "kind", "tags", "x-y", "n2"])
PATTERNS = st.sampled_from(["^[a-z]+$", "^[A-Z]{2}-\\d{3}$", "ab+c", "^(yes|no)$", "\\d",
                            "^[^x]*$"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-50, 50),
                    st.floats(-50, 50, allow_nan=False, allow_infinity=False),
                    st.text(max_size=6))


def _string() -> st.SearchStrategy[dict]:
    @st.composite
    def build(draw):
        s: dict = {"type": "string"}
        if draw(st.booleans()):
            s["pattern"] = draw(PATTERNS)
            return s
        lo = draw(st.none() | st.integers(0, 4))
        hi = draw(st.none() | st.integers(lo or 0, 12))
        if lo is not None:
            s["minLength"] = lo
        if hi is not None:
            s["maxLength"] = hi
        if draw(st.booleans()):
            s["format"] = draw(st.sampled_from(["date", "uuid", "email", "date-time"]))
            s.pop("minLength", None), s.pop("maxLength", None)
        return s
    return build()


def _number() -> st.SearchStrategy[dict]:
    @st.composite
    def build(draw):
        s: dict = {"type": draw(st.sampled_from(["integer", "number"]))}
        lo = draw(st.none() | st.integers(-20, 20))
        if lo is not None:
            s["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = lo
        hi = draw(st.none() | st.integers(30, 60))
        if hi is not None:
            s["maximum"] = hi
        if draw(st.booleans()):
            s["multipleOf"] = draw(st.sampled_from([2, 3, 5]))
        return s
    return build()


LEAVES = st.one_of(
    _string(), _number(), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.lists(st.one_of(st.text(max_size=5), st.integers(-5, 5), st.booleans()),
             min_size=1, max_size=4, unique_by=repr).map(lambda e: {"enum": e}),
    SCALARS.map(lambda c: {"const": c}),
    st.sampled_from(["string", "integer", "boolean"]).map(lambda t: {"type": [t, "null"]}),
)


def _objects(children: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    @st.composite
    def build(draw):
        props = draw(st.dictionaries(NAMES, children, min_size=1, max_size=4))
        req = [n for n in props if draw(st.booleans())]
        s = {"type": "object", "properties": props, "required": req}
        if draw(st.booleans()):
            s["additionalProperties"] = False
        if draw(st.booleans()):
            s["description"] = "annotated"
        return s
    return build()


def _arrays(children: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    @st.composite
    def build(draw):
        s = {"type": "array", "items": draw(children)}
        lo = draw(st.integers(0, 2))
        if lo:
            s["minItems"] = lo
        if draw(st.booleans()):
            s["maxItems"] = lo + draw(st.integers(0, 3))
        return s
    return build()


def _anyof(children: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    return st.lists(children, min_size=2, max_size=3).map(lambda bs: {"anyOf": bs})


VALUES = st.deferred(lambda: SCALARS | st.lists(VALUES, max_size=3)
                     | st.dictionaries(NAMES, VALUES, max_size=3))
NODES = st.recursive(LEAVES, lambda kids: _objects(kids) | _arrays(kids) | _anyof(kids),
                     max_leaves=8)
OUTPUT_SCHEMAS = _objects(NODES)
"""Object schemas at the root, as an output type needs."""


def strict_safe(schema: dict) -> bool:
    """Whether strict mode can express the schema (no free-key object, no value of any type)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "object" and not schema.get("properties") and \
            schema.get("additionalProperties") is not False:
        return False
    return all(strict_safe(v) for k, v in schema.items() if k in ("items",)) and all(
        strict_safe(v) for v in (schema.get("properties") or {}).values()) and all(
        strict_safe(v) for v in schema.get("anyOf") or ())
