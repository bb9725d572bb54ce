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
Training runs on the shared loop (:func:`parasim.train.core.loop.fit`: accelerate, checkpoints
and resume after ``kill -9``, seeds); the dev metric is contextual word retrieval
(:mod:`parasim.train.eval.cwr`) on the dev page pairs. The output folder is a plain
``save_pretrained`` encoder plus tokenizer (``README.md`` card, ``metrics.json``,
``training_curve.png``, ``history.json`` beside), loadable by
:func:`parasim.models.load_encoder` wherever a rule names an encoder.

Modules: :mod:`.settings` (``train.align_encoder``), :mod:`.wordpairs` (the word pairs of the
positives: rule ``align_encoder_wordpairs``), :mod:`.data` (word pairs as parallel sets, the
training units), :mod:`.training` (the loss and the run), :mod:`.evaluate` (contextual word
retrieval of encoders, :mod:`parasim.train.eval.cwr`) and :mod:`.commands`.
"""
