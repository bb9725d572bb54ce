"""AMR graphs as plain triples: reading Penman strings and the views the metrics need.

Every metric starts from :class:`Graph`, read once per Penman string by :func:`read_graph`:
variables with their concepts, relations between variables and attributes (a variable and a
constant). Reading normalises what the metrics must not tell apart: concepts and constants are
lower-cased and unquoted, inverted roles (``:ARG0-of``) are turned back (Penman does it) and
``:domain`` is stored as the inverse ``:mod`` (the AMR guidelines define one as the other).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cached_property

Triple = tuple[str, str, str]

#: A frame (PropBank predicate) concept: a lemma with a numbered sense, ``see-01``.
FRAME_RE = re.compile(r"^.+-\d\d$")

logging.getLogger("penman").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Graph:
    """One AMR graph, normalised.

    Attributes:
        top: The root variable ("" for an empty graph).
        concepts: variable -> concept, in the order of the Penman string.
        relations: (source variable, role, target variable) triples.
        attributes: (variable, role, constant) triples.
    """

    top: str
    concepts: dict[str, str]
    relations: tuple[Triple, ...]
    attributes: tuple[Triple, ...]

    def __len__(self) -> int:
        return len(self.concepts)

    @cached_property
    def triples(self) -> list[Triple]:
        """Smatch triples: instances, the root marker, relations and attributes (no duplicates)."""
        out: list[Triple] = [(v, ":instance", c) for v, c in self.concepts.items()]
        if self.top:
            out.append((self.top, ":top", "top"))
        out += self.relations
        out += self.attributes
        return list(dict.fromkeys(out))

    @cached_property
    def in_degree(self) -> dict[str, int]:
        """Incoming relations per variable."""
        deg = dict.fromkeys(self.concepts, 0)
        for _, _, t in self.relations:
            deg[t] += 1
        return deg

    @cached_property
    def out_degree(self) -> dict[str, int]:
        """Outgoing relations and attributes per variable."""
        deg = dict.fromkeys(self.concepts, 0)
        for s, _, _ in self.relations + self.attributes:
            deg[s] += 1
        return deg


def _clean(value: object) -> str:
    text = str(value)
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return text.lower()


def read_graph(penman_text: str) -> Graph:
    """Read one Penman graph (metadata comments are ignored).

    Args:
        penman_text: One graph in Penman notation.

    Returns:
        The normalised :class:`Graph`.

    Raises:
        ValueError: The text is not a Penman graph.
    """
    import penman

    try:
        g = penman.decode(penman_text)
    except Exception as exc:  # noqa: BLE001 - penman raises several error types
        raise ValueError(f"not a Penman graph: {exc}") from exc
    concepts: dict[str, str] = {}
    for var, _, concept in g.instances():
        concepts[var] = _clean(concept if concept is not None else "")
    relations: list[Triple] = []
    attributes: list[Triple] = []
    for s, role, t in g.edges():
        if role == ":domain":
            s, role, t = t, ":mod", s
        relations.append((s, role, t))
    for s, role, t in g.attributes():
        if role == ":domain":
            role = ":mod"
        attributes.append((s, role, _clean(t)))
    top = g.top if g.top in concepts else ""
    return Graph(top, concepts, tuple(relations), tuple(attributes))


def read_graphs_file(path: str) -> list[tuple[dict[str, str], str]]:
    """Graphs of an AMR bank file with their metadata (``# ::snt`` ...), in file order.

    Args:
        path: A file of Penman graphs separated by blank lines.

    Returns:
        A list of (metadata, Penman string without the metadata comments).
    """
    import penman

    out = []
    with open(path, encoding="utf-8") as f:
        for g in penman.iterdecode(f.read()):
            meta = dict(g.metadata)
            g.metadata = {}
            out.append((meta, penman.encode(g)))
    return out
