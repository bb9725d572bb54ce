"""Contrastive training pairs from the ranking groups of a divergences table (seed 000 §6.1)."""

from __future__ import annotations

import random
from collections import defaultdict

import pyarrow as pa

from .stage import TYPES


def contrastive_pairs(
    table: pa.Table, mode: str = "ranking", seed: int = 13, valid_only: bool = True
) -> list[tuple[str, str]]:
    """Contrastive training pairs ``(x_id, y_id)`` with x ranked above y (seed 000 §6.1).

    Args:
        table: a divergences table.
        mode: ``"single:<type>"`` (equivalent vs each variant of one type), ``"balanced"``
            (equivalent vs one random variant), ``"concatenation"`` (equivalent vs every variant)
            or ``"ranking"`` (every row vs every row of the next rank present in its group).
        seed: for ``"balanced"``.
        valid_only: leave out rows that failed a validity check.

    Raises:
        ValueError: for an unknown mode.
    """
    cols = table.select(["id", "group_id", "type", "rank", "checks_failed"]).to_pylist()
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in cols:
        if not valid_only or not r["checks_failed"]:
            groups[r["group_id"]].append(r)
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for gid in sorted(groups):
        g = groups[gid]
        eq = [r for r in g if r["rank"] == 0]
        div = [r for r in g if r["rank"] > 0]
        if mode.startswith("single:"):
            typ = mode.split(":", 1)[1]
            if typ not in TYPES[1:]:
                raise ValueError(f"contrastive_pairs: unknown type {typ!r}")
            out += [(x["id"], y["id"]) for x in eq for y in div if y["type"] == typ]
        elif mode == "balanced":
            if eq and div:
                out.append((eq[0]["id"], rng.choice(div)["id"]))
        elif mode == "concatenation":
            out += [(x["id"], y["id"]) for x in eq for y in div]
        elif mode == "ranking":
            levels = sorted({r["rank"] for r in g})
            for a, b in zip(levels, levels[1:], strict=False):
                out += [
                    (x["id"], y["id"]) for x in g if x["rank"] == a for y in g if y["rank"] == b
                ]
        else:
            raise ValueError(f"contrastive_pairs: unknown mode {mode!r}")
    return out
