"""``[variants]``: strategies side by side — one job run once per combination of the values
its ``[variants]`` table lists, on the same tasks, into one run root (docs/scores.md).

``[variants]`` holds keys of the job file, each given a list: ``synod.n = [1, 5]``,
``provider.model = ["a", "b"]``, ``agent.context_window = [32000, 200000]``. Every combination
is a variant (their product, in the order written), named by its values (``synod.n=5``), and
checked as a whole job before anything runs: a value the key cannot take is refused naming
the ``[variants]`` line.

The run root holds ``variants.json`` (the names, in order, and each one's folder) and one
ordinary run root per variant (``<k>-<name>``, each its own ``job.json``, logs and
``results.jsonl``): every command that reads a run root reads a variant's, and ``mnemon
results``, ``mnemon score`` and ``mnemon compare`` read the whole — each row then carries
its ``variant``. Decision 0392.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import msgspec

from ... import _toml as toml
from .results import read_results
from .spec import Job, JobError, JobSpec, _explain, _line, _check_scores

__all__ = ["MANIFEST", "Variant", "read_rows", "variant_roots", "variants_of", "write_manifest"]

MANIFEST = "variants.json"
_MOST = 64
_FOLDER = re.compile(r"[0-9]{1,3}-[A-Za-z0-9._=-]{0,60}")


class Variant(msgspec.Struct, frozen=True):
    name: str
    folder: str
    job: Job


def _leaves(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                              Any]]:
    out = []
    for k, v in table.items():
        if isinstance(v, dict):
            out += _leaves(v, (*prefix, k))
        else:
            out.append(((*prefix, k), v))
    return out


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for k in path[:-1]:
        nxt = data.get(k)
        if not isinstance(nxt, dict):
            nxt = data[k] = {}
        data = nxt
    data[path[-1]] = value


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def variants_of(job: Job) -> list[Variant]:
    """The job's variants, each a checked job (none for a job without ``[variants]``)."""
    table = job.spec.variants
    if not table:
        return []
    where = f"{job.path}:{_line(job.text, ('variants',)) or '?'}"
    leaves = _leaves(table)
    for path, values in leaves:
        if not isinstance(values, list) or not values:
            raise JobError(f"{where}: [variants] {'.'.join(path)} takes a list of values "
                           "(one per variant)")
        if path[0] in ("variants", "tasks", "input", "score", "run_root", "output"):
            raise JobError(f"{where}: [variants] cannot vary {path[0]} (the variants run the "
                           "same tasks, scored the same way, into one run root)")
    combos = list(itertools.product(*(values for _, values in leaves)))
    if len(combos) > _MOST:
        raise JobError(f"{where}: [variants] makes {len(combos)} variants (at most {_MOST})")
    base = toml.parse(job.text, job.path)
    base.pop("variants", None)
    out = []
    for k, combo in enumerate(combos, 1):
        data = json.loads(json.dumps(base))  # a deep copy of plain TOML values
        for (path, _), value in zip(leaves, combo):
            _set(data, path, value)
        name = ",".join(f"{'.'.join(path)}={_show(v)}" for (path, _), v in zip(leaves, combo))
        try:
            spec = msgspec.convert(data, JobSpec)
        except msgspec.ValidationError as e:
            raise JobError(f"{where}: [variants] {name}: "
                           f"{_explain(job.path, job.text, str(e)).split(': ', 2)[-1]}") from None
        _check_scores(job.path, job.text, spec)
        if spec.synod is not None and len(spec.synod.stances) > spec.synod.n:
            raise JobError(f"{where}: [variants] {name}: {len(spec.synod.stances)} stances for "
                           f"n = {spec.synod.n} children")
        folder = f"{k}-" + re.sub(r"[^A-Za-z0-9._=-]", "_", name)[:60]
        out.append(Variant(name=name, folder=folder,
                           job=Job(spec=spec, path=job.path, text=job.text)))
    return out


def write_manifest(root: Path, variants: list[Variant]) -> None:
    """``variants.json`` in the run root: a run root holds one job's variants, refused when
    the names differ from those it holds."""
    path = root / MANIFEST
    now = [{"name": v.name, "folder": v.folder} for v in variants]
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))["variants"]
        except (OSError, ValueError, KeyError, TypeError):
            raise JobError(f"{path}: not a variants manifest") from None
        if old != now:
            raise JobError(f"{root} holds other variants ({', '.join(o['name'] for o in old)})"
                           " — name a new run root")
        return
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"format": 1, "variants": now}, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def variant_roots(root: Path) -> list[tuple[str, Path]] | None:
    """``(name, run root)`` of each variant a run root holds; None for a run root without."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        return [(v["name"], root / v["folder"])
                for v in json.loads(path.read_text(encoding="utf-8"))["variants"]
                if _FOLDER.fullmatch(v["folder"])]  # a name we made, never a path
    except (OSError, ValueError, KeyError, TypeError):
        raise JobError(f"{path}: not a variants manifest") from None


def read_rows(root: Path, results: Path | None = None) -> list[dict[str, Any]]:
    """Every results row of a run root — each variant's, with its ``variant``, in order."""
    roots = variant_roots(root)
    if roots is None:
        return list(read_results(results or root / "results.jsonl").values())
    rows = []
    for name, sub in roots:
        for row in read_results(sub / "results.jsonl").values():
            rows.append({**row, "variant": name})
    return rows
