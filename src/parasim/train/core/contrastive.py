"""Fine-tuning a sentence encoder on the corpus's triples with a ranking loss.

:func:`triples` turns the corpus into (anchor, positive, hard negative) triples: every
equivalent row of a split is a positive pair (its English sentence and its translation), and its
hard negative comes from the graded tiers (``grades="graded"``: one of its divergent rows, else
its unrelated row) or from seed 001's unrelated rows alone (``grades="binary"``). Positives
without a hard negative are left out and counted.

:func:`fit_contrastive` fine-tunes a transformers encoder, mean-pooled, on those triples with
sentence-transformers' ``MultipleNegativesRankingLoss`` (each anchor against its positive, its
hard negative and the other rows' positives and negatives of the batch) or with
:class:`parasim.train.core.losses.GradedRankingLoss` (the batch's pairs ranked by grade:
translations above divergent rows above unrelated ones) through
``SentenceTransformerTrainer``: Hugging Face Trainer conventions (a `datasets` input, seeded,
checkpoints every ``save_steps`` steps under the output folder, resumed from the newest complete
one after a ``kill -9``), and a final ``save_pretrained`` folder with a model card that loads with
``SentenceTransformer(path)``. e5 was trained with a ``"query: "`` prefix on both sides of a
symmetric task; the prefix is the model's default prompt, so the saved folder's ``encode``
prepends it as training did.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("parasim.train")

#: The two ways of picking a positive's hard negative (:func:`triples`).
GRADES = ("graded", "binary")
#: The losses :func:`fit_contrastive` trains with: sentence-transformers'
#: ``MultipleNegativesRankingLoss`` (``"mnrl"``) or
#: :class:`~parasim.train.core.losses.GradedRankingLoss`
#: (``"graded_ranking"``), each under its name in the run's settings.
LOSSES = {"mnrl": "MultipleNegativesRankingLoss", "graded_ranking": "GradedRankingLoss"}
#: The grade of each scored pair of :class:`~parasim.train.core.losses.GradedRankingLoss`: an
#: anchor and its positive, its divergent hard negative, and anything else (an unrelated hard
#: negative, the batch's other rows).
RANK_EQUIVALENT, RANK_DIVERGENT, RANK_UNRELATED = 2.0, 1.0, 0.0
#: Each loss in words (model cards).
LOSS_WORDS = {
    "mnrl": "sentence-transformers' MultipleNegativesRankingLoss",
    "graded_ranking": "parasim's GradedRankingLoss (CoSENT's ranking over three grades)",
}


def loss_words(loss: str, retain: float, named: str) -> str:
    """``loss`` in words (:data:`LOSS_WORDS`), with the pull back to the start when ``retain``
    is above 0 (``named``: how the card names its weight)."""
    if not retain:
        return LOSS_WORDS[loss]
    return (
        f"{LOSS_WORDS[loss]} plus a pull of every sentence back to the untrained start's "
        f"embedding ({named} {retain:g})"
    )


#: Where a triple's negative came from: a divergent row whose other-language side (or, flipped,
#: whose English side) was edited or mined, or an unrelated row.
NEGATIVE_SOURCES = ("divergent_other", "divergent_en", "unrelated")
#: The final model's folder inside the output folder; the checkpoints lie beside it.
MODEL_DIR = "model"
CHECKPOINT_DIR = "checkpoints"
#: Inside the final folder: the run's settings, counts and figures (written last).
RUN_FILE = "parasim_contrastive.json"
#: Inside the checkpoint folder: the fingerprint of the run its checkpoints belong to.
RUN_FINGERPRINT = "parasim_run.json"
_COLUMNS = ["id", "sentence1", "sentence2", "grade", "parent_id", "diff_side", "pair_id", "idx1"]


@dataclasses.dataclass
class Triples:
    """(anchor, positive, negative) training triples and how they were made.

    Attributes:
        anchor, positive, negative: the texts, one triple per index.
        source: where each negative came from (:data:`NEGATIVE_SOURCES`).
        counts: ``positives`` (equivalent rows read) ``== triples + left_out_no_negative``;
            ``triples`` is the sum of ``negative_<source>``; the rows read per grade
            (``divergent_rows``, ``unrelated_rows``) and those matching no positive read
            (``divergent_unmatched``, ``unrelated_unmatched``).
        grades: ``"graded"`` or ``"binary"``.
        split: the corpus split read.
        partitions: the partitions read.
    """

    anchor: list[str]
    positive: list[str]
    negative: list[str]
    source: list[str]
    counts: dict[str, int]
    grades: str
    split: str
    partitions: list[str]

    def __len__(self) -> int:
        return len(self.anchor)

    def dataset(self, with_grades: bool = False):
        """The triples as a `datasets` Dataset with columns anchor, positive, negative (the
        order ``MultipleNegativesRankingLoss`` reads them in); ``with_grades``: and ``label``,
        the grade of each negative (:meth:`negative_grades`), which the trainer hands to
        :class:`~parasim.train.core.losses.GradedRankingLoss` as its labels."""
        import datasets

        cols = {"anchor": self.anchor, "positive": self.positive, "negative": self.negative}
        if with_grades:
            cols["label"] = self.negative_grades()
        return datasets.Dataset.from_dict(cols)

    def negative_grades(self) -> list[float]:
        """Each negative's grade against its anchor: `RANK_DIVERGENT` for a divergent row,
        `RANK_UNRELATED` for an unrelated one."""
        return [
            RANK_DIVERGENT if src.startswith("divergent") else RANK_UNRELATED for src in self.source
        ]

    def fingerprint(self) -> str:
        """A short hash of the texts: a checkpoint resumes only on the same triples."""
        from parasim.train.core.loop import fingerprint

        return fingerprint([self.anchor, self.positive, self.negative])


def _shards(corpus_dir: Path, partitions: Sequence[str], split: str) -> list[Path]:
    out = []
    for part in partitions:
        files = sorted((corpus_dir / "data" / part).glob(f"{split}-*.parquet"))
        out += [f for f in files if not f.name.startswith(".")]
    return out


def _read_rows(files: Sequence[Path], columns: Sequence[str] = _COLUMNS) -> list[dict]:
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for f in files:
        rows += pq.read_table(f, columns=list(columns)).to_pylist()
    return rows


def split_rows(
    corpus_dir: str | os.PathLike,
    partitions: Sequence[str] | None = None,
    split: str = "test",
    columns: Sequence[str] = (*_COLUMNS, "negative_kind"),
) -> list[dict]:
    """The ``columns`` of every row of one split of a corpus (``<corpus>/data/<partition>/
    <split>-*``), every partition when ``partitions`` is None.

    Raises:
        ValueError: no shard of ``split`` in those partitions.
    """
    from parasim.train.core.data import corpus_partitions

    corpus_dir = Path(corpus_dir)
    parts = list(partitions) if partitions else corpus_partitions(corpus_dir)
    files = _shards(corpus_dir, parts, split)
    if not files:
        raise ValueError(
            f"{corpus_dir}: no {split} shard in data/<partition>/ for partitions {parts}"
        )
    return _read_rows(files, columns)


def _unrelated_key(row: dict) -> tuple[str, tuple[int, ...]]:
    """An unrelated row's sentence1 is the English line of some positive: its page pair and
    line indices name that positive."""
    return row["pair_id"], tuple(row["idx1"])


def triples(
    corpus_dir: str | os.PathLike,
    partitions: Sequence[str] | None = None,
    split: str = "train",
    grades: str = "graded",
    seed: int = 0,
) -> Triples:
    """The training triples of one split of a corpus (``<corpus>/data/<partition>/<split>-*``).

    For every equivalent row, anchor = its English ``sentence1``, positive = its ``sentence2``,
    and the hard negative:

    * ``graded``: one of its divergent rows (``parent_id`` = its id; a seeded choice when it has
      several). When the divergent row edited the other side (``diff_side`` "other": a
      synthetic edit or a mined line), the negative is that row's ``sentence2``. When it edited
      the English side (``diff_side`` "en"), the triple is flipped so that the anchor stays
      the side both share: anchor = the positive's ``sentence2``, positive = its ``sentence1``,
      negative = the divergent row's ``sentence1``. A positive without a divergent row takes
      its unrelated row's ``sentence2`` when it has one.
    * ``binary``: its unrelated row's ``sentence2`` (seed 001's LDA negatives only).

    An unrelated row belongs to the positive with the same ``pair_id`` and ``idx1`` (its
    ``sentence1`` is that positive's English line); of several, one seeded choice.

    Args:
        corpus_dir: the corpus folder (``results/corpus``).
        partitions: the partitions to read (None: every partition folder).
        split: ``"train"`` or ``"test"``.
        grades: ``"graded"`` or ``"binary"``.
        seed: seeds the choice among several candidate negatives.

    Returns:
        :class:`Triples`, in the order of the positives in the shards.

    Raises:
        ValueError: an unknown ``grades``, or no shard of ``split`` in those partitions.
    """
    from parasim.partition import seeded_key
    from parasim.train.core.data import corpus_partitions

    if grades not in GRADES:
        raise ValueError(f"grades: one of {list(GRADES)}, not {grades!r}")
    parts = list(partitions) if partitions else corpus_partitions(Path(corpus_dir))
    rows = split_rows(corpus_dir, parts, split, _COLUMNS)
    positives = [r for r in rows if r["grade"] == "equivalent"]
    by_id = {r["id"]: r for r in positives}
    by_line = {_unrelated_key(r): r["id"] for r in positives}
    divergent: dict[str, list[dict]] = defaultdict(list)
    unrelated: dict[str, list[dict]] = defaultdict(list)
    counts: Counter = Counter(positives=len(positives))
    for r in rows:
        if r["grade"] == "divergent":
            counts["divergent_rows"] += 1
            if r["parent_id"] in by_id:
                divergent[r["parent_id"]].append(r)
            else:
                counts["divergent_unmatched"] += 1
        elif r["grade"] == "unrelated":
            counts["unrelated_rows"] += 1
            pid = by_line.get(_unrelated_key(r))
            if pid is not None:
                unrelated[pid].append(r)
            else:
                counts["unrelated_unmatched"] += 1

    def pick(pid: str, cands: list[dict], tag: str) -> dict:
        return min(cands, key=lambda c: seeded_key(seed, "contrastive", tag, pid, c["id"]))

    out = Triples([], [], [], [], {}, grades, split, parts)
    for p in positives:
        cands = divergent.get(p["id"]) if grades == "graded" else None
        if cands:
            d = pick(p["id"], cands, "divergent")
            if d["diff_side"] == "en":
                triple = (p["sentence2"], p["sentence1"], d["sentence1"], "divergent_en")
            else:
                triple = (p["sentence1"], p["sentence2"], d["sentence2"], "divergent_other")
        elif unrelated.get(p["id"]):
            u = pick(p["id"], unrelated[p["id"]], "unrelated")
            triple = (p["sentence1"], p["sentence2"], u["sentence2"], "unrelated")
        else:
            counts["left_out_no_negative"] += 1
            continue
        for field, value in zip(("anchor", "positive", "negative", "source"), triple, strict=True):
            getattr(out, field).append(value)
        counts[f"negative_{triple[3]}"] += 1
    counts["triples"] = len(out)
    keys = ["positives", "triples", "left_out_no_negative"]
    keys += [f"negative_{s}" for s in NEGATIVE_SOURCES]
    keys += ["divergent_rows", "divergent_unmatched", "unrelated_rows", "unrelated_unmatched"]
    out.counts = {k: counts[k] for k in keys}
    log.info("%s triples of %s (%s): %s", grades, split, ", ".join(parts), out.counts)
    return out


@dataclasses.dataclass
class ContrastiveResult:
    """What :func:`fit_contrastive` returns (also written to the final folder's
    :data:`RUN_FILE`, with the settings and the triples' counts).

    Attributes:
        model_dir: the final folder (loads with ``SentenceTransformer(model_dir)``).
        global_step: optimizer steps of the whole run (those resumed from included).
        steps_run: optimizer steps this call ran (fewer than ``global_step`` after a resume).
        resumed_from: the checkpoint folder this call resumed from (None: a fresh start).
        train_loss: the mean training loss of the steps this call ran (None: it ran none).
        losses: ``(step, loss)`` of every logged step, the resumed ones included.
        seconds: wall seconds of this call's training (start-up and checkpoints included).
        step_seconds: wall seconds of each optimizer step this call ran (forward, backward
            and update of one batch; the first one includes warming up).
        device: the torch device trained on; ``precision``: ``"bf16"``, ``"fp16"`` or ``"no"``.
        trainable_parameters, frozen_parameters: parameter counts of the encoder.
    """

    model_dir: Path
    global_step: int
    steps_run: int
    resumed_from: str | None
    train_loss: float | None
    losses: list[tuple[int, float]]
    seconds: float
    step_seconds: list[float]
    device: str
    precision: str
    trainable_parameters: int
    frozen_parameters: int


def build_model(model: str, *, max_length: int = 128, prefix: str = "query: ", device: str = "cpu"):
    """A ``SentenceTransformer`` of a transformers encoder with mean pooling over its tokens.

    Args:
        model: a HF folder or name, or an offline name (``"e5-torch"``:
            :func:`parasim.train.core.encoder.resolve_model`).
        max_length: subword tokens per sentence (longer ones are truncated).
        prefix: the default prompt, prepended to every sentence it encodes ("": none).
        device: the torch device to place it on.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from parasim.train.core.encoder import resolve_model

    path = resolve_model(model, "model")
    word = Transformer(path, max_seq_length=max_length)
    pooling = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    prompts = {"query": prefix} if prefix else None
    return SentenceTransformer(
        modules=[word, pooling],
        device=device,
        prompts=prompts,
        default_prompt_name="query" if prefix else None,
    )


def _precision(device: str, dtype: str) -> str:
    """``"bf16"``, ``"fp16"`` or ``"no"`` as :mod:`parasim.accel` resolves ``dtype`` on
    ``device`` (no fp16 autocast on a CPU)."""
    import torch

    from parasim.accel import resolve_dtype

    resolved = resolve_dtype(device, dtype, "dtype")
    precision = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(resolved, "no")
    return "no" if device == "cpu" and precision == "fp16" else precision


def _complete_checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """The checkpoints a ``kill -9`` did not interrupt, oldest first; the others are removed.

    The Trainer writes ``trainer_state.json`` last, so a folder whose state file parses and
    names its own step is complete."""
    found = []
    for d in sorted(ckpt_dir.glob("checkpoint-*")) if ckpt_dir.is_dir() else []:
        try:
            step = int(d.name.split("-", 1)[1])
            state = json.loads((d / "trainer_state.json").read_text(encoding="utf-8"))
            ok = state.get("global_step") == step
        except (ValueError, OSError, json.JSONDecodeError):
            ok = False
        if ok:
            found.append((step, d))
        else:
            log.warning("incomplete checkpoint %s removed", d)
            shutil.rmtree(d, ignore_errors=True)
    return sorted(found)


def _resume_point(ckpt_dir: Path, fp: str) -> Path | None:
    """The newest complete checkpoint of the run with fingerprint ``fp``; checkpoints of another
    run (other settings or triples) are removed and the run starts afresh."""
    marker = ckpt_dir / RUN_FINGERPRINT
    if ckpt_dir.is_dir():
        try:
            same = json.loads(marker.read_text(encoding="utf-8")).get("fingerprint") == fp
        except (OSError, json.JSONDecodeError):
            same = False
        if not same:
            log.warning("%s: checkpoints of other settings or triples, not resumed", ckpt_dir)
            shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"fingerprint": fp}) + "\n", encoding="utf-8")
    found = _complete_checkpoints(ckpt_dir)
    return found[-1][1] if found else None


def _progress_callback():
    """A Trainer callback that times each optimizer step this process runs and writes the
    Trainer's logs (loss, learning rate) to parasim's log instead of stdout."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def __init__(self) -> None:
            self.step_seconds: list[float] = []
            self._t = 0.0

        @property
        def steps(self) -> int:
            return len(self.step_seconds)

        def on_step_begin(self, args, state, control, **kwargs):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.step_seconds.append(time.perf_counter() - self._t)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                figures = " ".join(f"{k} {v:.4g}" for k, v in logs.items() if k != "epoch")
                log.info("step %d/%d: %s", state.global_step, state.max_steps, figures)

    return Progress()


def _loss(name: str, st, retain: float = 0.0):
    """The loss module ``name`` (:data:`LOSSES`) for the model ``st``, with
    :class:`~parasim.train.core.losses.RetainedLoss`'s pull back to the start when ``retain``
    is above 0."""
    from parasim.train.core.losses import GradedRankingLoss, RetainedLoss

    if name == "graded_ranking":
        base = GradedRankingLoss(st)
    else:
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )

        base = MultipleNegativesRankingLoss(st)
    return RetainedLoss(st, base, retain) if retain > 0 else base


def fit_contrastive(
    model: str,
    data: Triples,
    out_dir: str | os.PathLike,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float = 2e-5,
    freeze_embeddings: bool = True,
    seed: int = 0,
    max_length: int = 128,
    prefix: str = "query: ",
    warmup_ratio: float = 0.1,
    save_steps: int = 200,
    save_total_limit: int = 2,
    logging_steps: int = 10,
    device: str = "auto",
    dtype: str = "auto",
    name: str = "contrastive encoder",
    loss: str = "mnrl",
    retain: float = 0.0,
) -> ContrastiveResult:
    """Fine-tune ``model`` on ``data`` with ``loss`` for ``steps`` steps.

    The run's folder ``out_dir`` holds ``checkpoints/checkpoint-<step>`` (every ``save_steps``
    steps, the ``save_total_limit`` newest kept) and, at the end, the final folder
    ``model/`` (:data:`MODEL_DIR`, written atomically): the ``SentenceTransformer`` folder, a
    ``README.md`` model card and :data:`RUN_FILE`. A rerun resumes from the newest complete
    checkpoint when it was written under the same settings and triples, and ends with the
    model of an uninterrupted run (the Trainer restores the optimizer, the schedule, the RNGs
    and skips the batches already seen).

    Batches hold no text twice (the sampler ``no_duplicates``): a text repeated in a batch,
    as a flipped triple's English side can be, would be its own negative. One process on one
    device (the CPU or one GPU): the checkpoint bookkeeping is not shared between processes.

    Args:
        model: a HF folder or name, or ``"e5-torch"`` (:func:`build_model`).
        data: :func:`triples`.
        out_dir: the run's folder.
        steps: optimizer steps (the triples are repeated as needed).
        batch_size: triples per step.
        learning_rate: AdamW's peak learning rate (linear warm-up, then linear decay to 0).
        freeze_embeddings: keep the word embedding matrix fixed (``requires_grad`` False): the
            shared multilingual vocabulary stays aligned across languages, and AdamW skips
            multilingual-e5-small's largest matrix (96M of its 118M parameters).
        seed: seeds the initialisation of anything new, dropout and the data order.
        max_length: subword tokens per sentence.
        prefix: prepended to every sentence, on both sides, in training and by the saved
            model's ``encode`` (e5's ``"query: "`` for symmetric tasks; "": none).
        warmup_ratio: share of ``steps`` of linear warm-up (0 <= ratio < 1).
        save_steps: steps between checkpoints.
        save_total_limit: how many checkpoints to keep.
        logging_steps: steps between logged losses.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (:func:`parasim.accel.resolve_device`).
        dtype: ``"auto"`` (bf16 where :mod:`parasim.accel` finds it native), ``"float32"``,
            ``"bfloat16"`` or ``"float16"`` (no fp16 autocast on a CPU).
        name: the model card's title.
        loss: ``"mnrl"``, sentence-transformers' ``MultipleNegativesRankingLoss`` (each anchor
            against its positive, its hard negative and the batch's other texts, a softmax), or
            ``"graded_ranking"``, :class:`parasim.train.core.losses.GradedRankingLoss` (CoSENT's
            ranking over the batch's pairs: translations above divergent rows above the rest;
            the negatives' grades from ``data.source``).
        retain: the weight of the pull of every sentence back to where the untrained start
            puts it (:class:`parasim.train.core.losses.RetainedLoss`: ``retain x 20 x mean(1 -
            cos)``, one more forward pass a step); 0: none.

    Returns:
        :class:`ContrastiveResult`.

    Raises:
        ValueError: no triples, ``steps`` or ``batch_size`` below 1, a ``warmup_ratio`` outside
            [0, 1), an unknown ``loss``, a ``retain`` below 0.
    """
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from transformers import PrinterCallback

    from parasim.accel import resolve_device
    from parasim.train.core.card import write_dir, write_model_card
    from parasim.train.core.loop import fingerprint, set_seed

    if not len(data):
        raise ValueError("fit_contrastive: no triples to train on")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"fit_contrastive: steps {steps} and batch_size {batch_size} must be >= 1")
    if not 0 <= warmup_ratio < 1:
        raise ValueError(f"fit_contrastive: warmup_ratio in [0, 1), not {warmup_ratio}")
    if loss not in LOSSES:
        raise ValueError(f"fit_contrastive: loss one of {sorted(LOSSES)}, not {loss!r}")
    if not retain >= 0:
        raise ValueError(f"fit_contrastive: retain at least 0, not {retain}")
    out_dir = Path(out_dir)
    dev = resolve_device(device, "device")
    precision = _precision(dev, dtype)
    settings = {
        "model": model, "steps": steps, "batch_size": batch_size,
        "learning_rate": learning_rate, "freeze_embeddings": freeze_embeddings, "seed": seed,
        "max_length": max_length, "prefix": prefix, "warmup_ratio": warmup_ratio,
        "loss": LOSSES[loss], "retain": retain, "batch_sampler": "no_duplicates",
        "device": dev, "precision": precision,
    }  # fmt: skip
    fp = fingerprint([settings, data.fingerprint()])
    ckpt_dir = out_dir / CHECKPOINT_DIR
    resume = _resume_point(ckpt_dir, fp)

    set_seed(seed)
    st = build_model(model, max_length=max_length, prefix=prefix, device=dev)
    embeddings = st[0].auto_model.get_input_embeddings().weight
    embeddings.requires_grad_(not freeze_embeddings)
    trainable = sum(p.numel() for p in st.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in st.parameters() if not p.requires_grad)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(ckpt_dir),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_steps=warmup_ratio,  # a float below 1: a share of the steps (transformers 5)
        lr_scheduler_type="linear",
        seed=seed,
        data_seed=seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=dev == "cpu",
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=save_total_limit,
        logging_steps=logging_steps,
        report_to="none",
        disable_tqdm=True,
        dataloader_pin_memory=dev == "cuda",
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        prompts=prefix or None,
    )
    progress = _progress_callback()
    trainer = SentenceTransformerTrainer(
        model=st,
        args=args,
        train_dataset=data.dataset(with_grades=loss == "graded_ranking"),
        loss=_loss(loss, st, retain),
        callbacks=[progress],
    )
    trainer.remove_callback(PrinterCallback)  # the logs go to parasim's log (_progress_callback)
    log.info(
        "contrastive: %d triples, %d steps of %d on %s (precision %s)%s",
        len(data), steps, batch_size, dev, precision,
        f", resumed from {resume.name}" if resume else "",
    )  # fmt: skip
    t0 = time.perf_counter()
    out = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    seconds = time.perf_counter() - t0
    losses = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    result = ContrastiveResult(
        model_dir=out_dir / MODEL_DIR,
        global_step=trainer.state.global_step,
        steps_run=progress.steps,
        resumed_from=resume.name if resume else None,
        train_loss=out.training_loss if progress.steps else None,
        losses=losses,
        seconds=round(seconds, 2),
        step_seconds=[round(x, 3) for x in progress.step_seconds],
        device=dev,
        precision=precision,
        trainable_parameters=trainable,
        frozen_parameters=frozen,
    )
    record = {
        "settings": settings,
        "data": {"grades": data.grades, "split": data.split, "partitions": data.partitions,
                 **data.counts},
        "result": {k: v for k, v in dataclasses.asdict(result).items() if k != "model_dir"},
    }  # fmt: skip

    def write(tmp: Path) -> None:
        st.save_pretrained(str(tmp), create_model_card=False)
        write_model_card(
            tmp / "README.md",
            name,
            "A sentence encoder fine-tuned by `parasim.train.core.contrastive` with "
            f"{loss_words(loss, retain, 'RetainedLoss, weight')} on (anchor, positive, hard "
            f"negative) triples of the corpus ({data.grades} negatives), mean-pooled. Load it "
            "with `SentenceTransformer(path)`; `encode` prepends the training prefix "
            f"{prefix!r} (its default prompt).",
            record["data"],
            settings,
            {k: record["result"][k] for k in ("global_step", "train_loss", "seconds")},
        )
        (tmp / RUN_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n")

    write_dir(result.model_dir, write)
    log.info(
        "contrastive: step %d, loss %s, %.1f s; model %s",
        result.global_step, result.train_loss, seconds, result.model_dir,
    )  # fmt: skip
    return result


MERGE_FILE = "parasim_merge.json"


def merge_weights(
    start: str,
    tuned_dir: str | Path,
    share: float,
    out_dir: str | Path,
    *,
    max_length: int = 128,
    prefix: str = "query: ",
    name: str = "parasim merged encoder",
) -> Path:
    """The fine-tuned encoder's weights moved back towards its untrained start (WiSE-FT:
    Wortsman et al. 2022, "Robust fine-tuning of zero-shot models"): every floating weight
    becomes ``(1 - share) * start + share * tuned``; ``share`` 1 keeps the fine-tuned model, 0
    the untrained one. The fine-tuned model keeps what it learnt on the corpus's grades and
    the start keeps more of what it knew of other text (general STS).

    Args:
        start: the model the fine-tuning started from (a HF folder or an offline name,
            :func:`build_model`'s).
        tuned_dir: the fine-tuned ``SentenceTransformer`` folder (:func:`fit_contrastive`'s).
        share: the fine-tuned model's share, in [0, 1].
        out_dir: the merged model's folder (written whole or not at all), loading with
            ``SentenceTransformer(out_dir)``; its :data:`MERGE_FILE` says what was merged.
        max_length: :func:`build_model`'s, as in the fine-tuning.
        prefix: :func:`build_model`'s, as in the fine-tuning.
        name: the merged model's card title.

    Raises:
        ValueError: ``share`` outside [0, 1], or two models whose weights do not line up (not
            the same architecture), naming the first weight that differs.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    from parasim.train.core.card import write_dir, write_model_card

    if not 0.0 <= share <= 1.0:
        raise ValueError(f"merge share {share}: must lie in [0, 1] (the fine-tuned model's share)")
    tuned = SentenceTransformer(str(tuned_dir), device="cpu")
    base = build_model(start, max_length=max_length, prefix=prefix, device="cpu")
    w0, w1 = base.state_dict(), tuned.state_dict()
    if w0.keys() != w1.keys():
        odd = sorted(set(w0) ^ set(w1))
        raise ValueError(f"cannot merge {tuned_dir} with {start}: weight {odd[0]!r} is in one only")
    merged = {}
    for key, t in w1.items():
        s = w0[key]
        if s.shape != t.shape:
            raise ValueError(
                f"cannot merge {tuned_dir} with {start}: weight {key!r} is {tuple(t.shape)} "
                f"against {tuple(s.shape)}"
            )
        if t.is_floating_point():
            mix = (1.0 - share) * s.to(torch.float32) + share * t.to(torch.float32)
            merged[key] = mix.to(t.dtype)
        else:
            merged[key] = t
    tuned.load_state_dict(merged)
    record = {"start": start, "tuned": str(tuned_dir), "share": share, "method": "WiSE-FT"}

    def write(tmp: Path) -> None:
        tuned.save_pretrained(str(tmp), create_model_card=False)
        write_model_card(
            tmp / "README.md",
            name,
            f"The weights of `{tuned_dir}` merged with those of its untrained start `{start}`: "
            f"{share:g} × fine-tuned + {1 - share:g} × start (WiSE-FT, Wortsman et al. 2022). "
            "Load it with `SentenceTransformer(path)`.",
            {},
            record,
            {},
        )
        if (Path(tuned_dir) / RUN_FILE).is_file():  # the fine-tuning's settings and data
            shutil.copy2(Path(tuned_dir) / RUN_FILE, tmp / RUN_FILE)
        (tmp / MERGE_FILE).write_text(json.dumps(record, indent=2) + "\n")

    out = Path(out_dir)
    write_dir(out, write)
    log.info("merged %s with %s at share %g: %s", tuned_dir, start, share, out)
    return out
