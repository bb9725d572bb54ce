"""S3BERT (seed 002 §3, §5): sentence embeddings whose sub-embeddings stand for AMR aspects.

A sentence encoder (default: the offline English MiniLM, 384-d, the seed's model family) is
fine-tuned so that the cosine of the k-th 16-d slice of two sentence embeddings, scaled by a learnt
β_k, predicts the k-th AMR aspect score of the two sentences' graphs (the 15 aspects of the
scores stage, :data:`parasim.amr.ASPECTS`, in that order); the last 384 − 15·16 = 144 dimensions
are the residual. Two losses (seed eq. 3–6), per batch of b pairs:

    decomposition  α/b · Σ_i 1/K Σ_k (M_ik − β_k cos(F_k(s_i), F_k(s'_i)))²
    consistency    1/b² · Σ_i Σ_j (cos(T(s_i), T(s'_j)) − cos(S(s_i), S(s'_j)))²

where T is a frozen copy of the initial encoder (the teacher) and S the tuned one, over all b²
pairings of the batch. Only the last ``tune_layers`` transformer layers (and β) are trained. An
aspect the scores stage could not compute for a pair (null: a failed parse) is left out of that
pair's mean.

Data: the scores stage's rows (``results/scores``), each an English sentence pair: the English
side and the English translation of the other side (``other_en``) of the positives (the seed's
positive datum) and of the hard negatives (similar, not parallel sentences: the seed's negative
datum built by pairing a sentence with another pair's). Rows are split by page pair into train,
dev (early stopping) and a held-out test slice (the seed's §5.1 evaluation).

Evaluation (seed §5.1–5.2): Spearman per aspect of the sub-embedding cosine against the metric on
the test slice, beside SB-full (the untrained model's full-embedding cosine for every aspect) and
SB-rand (the untrained model, 16 random dimensions per aspect); and what the model forgets: the
STSb-multi-mt dev Spearman of the full-embedding cosine before and after.

Modules: :mod:`.settings` (``train.s3bert``), :mod:`.data` (scored pairs and their slices),
:mod:`.model` (the encoder with β, embedding, the model folder), :mod:`.evaluate` (per-aspect
Spearman beside SB-full and SB-rand), :mod:`.training` (the losses and the run) and
:mod:`.commands` (``parasim train-s3bert``).
"""
