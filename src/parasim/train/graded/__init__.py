"""The graded encoder (issue 49): what the corpus's three grades give a modern sentence encoder.

The encoder (``train.graded.model``, default the rebuilt multilingual-e5-small, mean pooling) is
fine-tuned on the graded triples of the corpus's train split
(:func:`parasim.train.core.contrastive.triples`): each equivalent row is an (anchor, positive)
pair whose hard negative is one of its divergent rows (a synthetic edit or a mined line), else
its unrelated row (seed 001's LDA negative). The loss (``train.graded.loss``) is
:class:`parasim.train.core.losses.GradedRankingLoss` (the default: CoSENT's ranking over the
batch's pairs, every translation above every divergent pair above every unrelated one) or
sentence-transformers' ``MultipleNegativesRankingLoss`` (each anchor against its positive, its
hard negative and the batch's other positives and negatives), trained through
:func:`parasim.train.core.contrastive.fit_contrastive`: checkpointed, resumed after a ``kill
-9``, a ``save_pretrained`` folder that loads with ``SentenceTransformer(path)``.

The trained encoder and its untrained start are then measured alike
(:mod:`parasim.train.eval.cosine`): on REFreSD dev, the cosine's binary weighted F1 (the
verdict: equivalent above the threshold, each encoder at its best cut on dev) and 3-class
weighted F1, and on STSb-multi-mt dev across languages, the Spearman of the cosine on EN-FR and
EN-ES. Each measure's difference has a paired bootstrap interval and a verdict
(:func:`parasim.train.core.verdict.compare`); without REFreSD the model still trains and its
verdict says why it could not be measured. A corpus with no divergent row in its train split
(or no triple at all) gives a skipped model whose ``metrics.json`` says why.

Modules: :mod:`.settings` (``train.graded``), :mod:`.training` (the run and its model folder),
:mod:`.evaluate` (the two encoders on the public sets, the verdicts) and :mod:`.commands`
(``parasim train-graded-encoder``).
"""
