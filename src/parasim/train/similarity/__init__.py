"""Seed 001 §4: sentence-pair similarity classifiers trained on the corpus, with its protocol.

For one encoder (``bilstm``: InferSent-style BiLSTM-max over frozen word vectors; ``biencoder``:
a fine-tuned transformer, see :mod:`.model`) and one training partition (a corpus
partition such as ``EN-FR-G``, or all of them together, named by their languages: ``EN-ES-FR``,
the seed's ``EN-FR-ES``), :func:`.training.train_similarity` runs:

* **k-fold cross-validation on the corpus's folds** (the ``fold`` column of the train split,
  grouped by page pair): fold model i trains on the other folds for a fixed budget (no early
  stopping: the held-out fold is only measured) and is measured on fold i. Reported: mean ± sd
  (sample sd) of the fold accuracies (seed Table 4 "Mean").
* **Voting** of the k fold models on the partition's test split: max voting (the majority of the
  hard votes; a tie goes to the mean probability) and average voting (mean P(similar) ≥ 0.5)
  (seed Table 4 "Max voting", "Avg. voting").
* **Cross-corpus test accuracy** (seed Table 5) on the test split of every partition in the
  corpus, pooled per language pair (the seed's columns en-fr, en-es) and over all: the best fold
  model by held-out-fold accuracy (the seed's choice) and the average-voting ensemble.
* **Baselines beside every figure**: the majority class of the training rows, and the untrained
  encoder's cosine of the two sides (the BiLSTM at its seeded initialisation; the pretrained
  transformer, mean-pooled) with the accuracy-maximising threshold chosen on the training folds.

MSRP transfer (train on the corpus, fine-tune on MSRP train, test on MSRP test) is
:func:`.msrp.evaluate_msrp`, run on the saved model when the user points ``eval.msrp_dir`` at a
copy.

Bad input never crashes the run: a partition with no rows, or with fewer than two non-empty folds,
is a skipped model (``metrics.json`` says why); a fold whose training rows hold one class is a
skipped fold (its reason in the results); when every fold is skipped the model is skipped.
Finished folds are kept (``folds/fold-<i>/result.json``) and a running fold resumes from its last
checkpoint, so a rerun after ``kill -9`` loses at most ``checkpoint_every`` steps.

Modules: :mod:`.settings` (``train.similarity``, the partitions the workflow names models after),
:mod:`.data` (a partition's corpus split), :mod:`.model` (the two classifiers and their folders),
:mod:`.training` (the protocol), :mod:`.msrp` (MSRP transfer, :mod:`parasim.train.eval.msrp`),
:mod:`.report` (the results tables) and :mod:`.commands`.
"""
