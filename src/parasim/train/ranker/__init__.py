"""The divergence ranker (seed 000 §3.3–3.4): a cross-encoder trained on synthetic divergences.

The (English, other) pair is encoded together (``[CLS] en [SEP] other [SEP]``). A linear head on
the pooled state (the encoder's pooler output where it has one, as BERT's tanh layer over
``[CLS]``; else the first token's final state) gives the sentence score F, high for
equivalent pairs; a linear head on every token's state gives EQ/DIV logits. For each contrastive
pair (x, y) of a ranking group, x ranked above y (equivalent > lexical substitution > phrase
replacement > subtree deletion, :func:`parasim.divergences.contrastive_pairs`), the loss is

    max(0, ξ − F(x) + F(y)) + tag_weight · (1/|y|) Σ_t CE(z_t, P(y_t))

averaged over pairs (seed 000 eq. 2), where z are y's EQ/DIV word tags given to each of the
word's subwords; at prediction a word is DIV if any of its subwords is.

Data: the divergences shards of every site; groups whose page pair is in the corpus test split
(:func:`parasim.partition.assign_splits`) are left out, and a seeded ``dev_fraction`` of the other
groups is the synthetic dev split for early stopping and for the decision threshold.

Modules: :mod:`.settings` (``train.divergence_ranker``), :mod:`.data` (ranking groups from the
divergences shards), :mod:`.model` (the ranker, its prediction, its model folder),
:mod:`.training` (the loss, the dev measures and threshold, the run), :mod:`.evaluate` (REFreSD
dev, :mod:`parasim.train.eval.refresd`) and :mod:`.commands` (``parasim
train-divergence-ranker``, ``parasim eval-divergence-ranker``).
"""
