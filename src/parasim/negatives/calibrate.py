"""The cosine band from the encoder's own similarity distribution.

The paper's band (0.80, 0.90) was set for OpenAI GPT vectors. Other encoders put sentences at
other cosines (mean-pooled causal-LM states are highly anisotropic: almost every pair is above
0.8), so the band is re-derived per partition from two samples:

* random pairs: two English sentences of different page pairs of the partition (seeded sample);
  every partition draws from its own generator (:func:`partition_rng`), so its band does not
  depend on the other partitions of the run;
* positives: M(en_text) against M(other_en), the English translation of its counterpart, the
  cosine of a true translation under this encoder (when ``other_en`` vectors are given).

``lo`` = the ``lo_random_quantile`` quantile of random pairs (default 0.90: more similar than 90%
of random pairs); ``hi`` = the lower of the ``hi_random_quantile`` quantile of random pairs
(default 0.995: the top half percent of random pairs is left out) and the
``hi_positive_quantile`` quantile of positives (default 0.10: less similar than 90% of true
translations). When the positives' quantile does not clear ``lo`` by ``min_width`` it is ignored
and the reason recorded. The band used is returned and goes into the dataset card.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parasim.config import Settings
from parasim.negatives.vectors import row_norms, unit_rows
from parasim.partition import CorpusConfig, partition_column

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CalibrateConfig(Settings, section="negatives.calibrate"):
    """The ``negatives.calibrate`` config section (what each key means: the schema)."""

    random_pairs: int
    positive_sample: int  # positives whose other_en is encoded for calibration
    lo_random_quantile: float
    hi_positive_quantile: float
    hi_random_quantile: float
    min_width: float
    seed: int


def calibration_rows(
    positives: pa.Table,
    cfg: CalibrateConfig | Mapping[str, Any] | None = None,
    corpus_cfg: CorpusConfig | Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Rows (sorted) whose ``other_en`` to encode for :func:`calibrate_band`: per partition, a
    seeded sample of ``positive_sample`` rows (:func:`partition_rng`).

    Encoding every ``other_en`` would double the encoder's work for a quantile; a few hundred do.
    Put their vectors at these rows of a zero array of the shape of the English vectors.

    Returns:
        partition -> its rows (positions in ``positives``), partitions in sorted order.
    """
    cfg = CalibrateConfig.from_config(cfg)
    ccfg = CorpusConfig.from_config(corpus_cfg)
    parts = np.array(partition_column(positives, ccfg.partitions), dtype=object)
    oe = positives.column("other_en")  # bool(t): neither null nor empty
    has = np.asarray(
        pc.fill_null(pc.greater(pc.utf8_length(oe), 0), False).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    out = {}
    for name in sorted(set(parts.tolist())):
        rows = np.nonzero(has & (parts == name))[0]
        rng = partition_rng(cfg.seed, "positives", name)
        out[name] = np.sort(rng.permutation(rows)[: cfg.positive_sample])
    return out


def partition_rng(seed: int, what: str, partition: str) -> np.random.Generator:
    """The random generator of one partition's calibration: seeded by ``seed``, ``what`` and the
    partition's name, so a partition's band is the same whichever other partitions are in the
    run (and one job per partition gives the band one job over all gives)."""
    digest = hashlib.sha1(f"{seed}\x1f{what}\x1f{partition}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@dataclasses.dataclass
class BandResult:
    """The band of one partition and the figures behind it."""

    band: tuple[float, float]
    method: str  # "calibrated" or "calibrated-random-only"
    n_random: int
    n_positive: int
    random_quantiles: dict[str, float]
    positive_quantiles: dict[str, float]
    share_random_in_paper_band: float  # share of random pairs with 0.8 < cos < 0.9
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly."""
        return dataclasses.asdict(self)


def _q(x: np.ndarray) -> dict[str, float]:
    if len(x) == 0:
        return {}
    qs = np.quantile(x, [0.01, 0.1, 0.5, 0.9, 0.99])
    out = {f"p{q}": round(float(v), 4) for q, v in zip((1, 10, 50, 90, 99), qs, strict=True)}
    return out | {"mean": round(float(x.mean()), 4)}


def calibrate_band(
    positives: pa.Table,
    en_vectors: np.ndarray,
    other_en_vectors: np.ndarray | None = None,
    cfg: CalibrateConfig | Mapping[str, Any] | None = None,
    corpus_cfg: CorpusConfig | Mapping[str, Any] | None = None,
) -> dict[str, BandResult]:
    """A cosine band per partition from the encoder's similarity distribution.

    Args:
        positives: rows of ``POSITIVES_SCHEMA``.
        en_vectors: M(en_text) per row.
        other_en_vectors: M(other_en) per row (zero rows where ``other_en`` is null), or None.
        cfg: the ``negatives.calibrate`` section.
        corpus_cfg: for the partitions.

    Returns:
        partition -> :class:`BandResult`.
    """
    cfg = CalibrateConfig.from_config(cfg)
    ccfg = CorpusConfig.from_config(corpus_cfg)
    parts = np.array(partition_column(positives, ccfg.partitions), dtype=object)
    docs = np.unique(
        positives.column("pair_id").to_numpy(zero_copy_only=False), return_inverse=True
    )[1]
    # float64 unit vectors of the sampled rows only (not a float64 copy of every row)
    en_vectors = np.asarray(en_vectors)
    en_ok = row_norms(en_vectors) > 0
    oe_ok = None if other_en_vectors is None else row_norms(other_en_vectors) > 0
    out: dict[str, BandResult] = {}
    for name in sorted(set(parts.tolist())):
        rows = np.nonzero((parts == name) & en_ok)[0]
        rnd = np.zeros(0)
        rng = partition_rng(cfg.seed, "random-pairs", name)
        if len(rows) >= 2:
            i = rng.choice(rows, size=cfg.random_pairs)
            j = rng.choice(rows, size=cfg.random_pairs)
            keep = docs[i] != docs[j]
            i, j = i[keep], j[keep]
            rnd = np.einsum("ij,ij->i", unit_rows(en_vectors, i), unit_rows(en_vectors, j))
        pos = np.zeros(0)
        if oe_ok is not None:
            prow = rows[oe_ok[rows]]
            oe = np.asarray(other_en_vectors)
            pos = np.einsum("ij,ij->i", unit_rows(en_vectors, prow), unit_rows(oe, prow))
        reason = None
        if len(rnd) == 0:
            lo, hi = 0.80, 0.90
            method = "paper-default"
            reason = "fewer than 2 page pairs with vectors: no random pairs; paper band kept"
        else:
            lo = float(np.quantile(rnd, cfg.lo_random_quantile))
            method = "calibrated"
            hi = float(np.quantile(rnd, cfg.hi_random_quantile))
            hi_pos = float(np.quantile(pos, cfg.hi_positive_quantile)) if len(pos) else None
            if hi_pos is None:
                reason = "no positive (other_en) vectors: hi from random pairs only"
                method = "calibrated-random-only"
            elif hi_pos < lo + cfg.min_width:
                reason = (
                    f"positives' q{cfg.hi_positive_quantile} ({hi_pos:.4f}) does not clear "
                    f"lo ({lo:.4f}) by {cfg.min_width}: ignored, hi from random pairs"
                )
                method = "calibrated-random-only"
            else:
                hi = min(hi, hi_pos)
            if hi <= lo:
                hi = min(1.0, lo + cfg.min_width)
        share = float(((rnd > 0.8) & (rnd < 0.9)).mean()) if len(rnd) else float("nan")
        res = BandResult(
            band=(round(lo, 6), round(hi, 6)),
            method=method,
            n_random=len(rnd),
            n_positive=len(pos),
            random_quantiles=_q(rnd),
            positive_quantiles=_q(pos),
            share_random_in_paper_band=share,
            reason=reason,
        )
        log.info("band %s: %s (%s)%s", name, res.band, method, f": {reason}" if reason else "")
        out[name] = res
    return out
