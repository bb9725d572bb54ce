"""The public-set evaluations, in one place: each module reads one public set and computes its
measures; the model families run their models on them.

:mod:`.refresd` (REFreSD dev, seed 000 Tables 3-4: the divergence ranker), :mod:`.sts`
(STSb-multi-mt dev: S3BERT, the entity-enriched Siamese model), :mod:`.cwr` (contextual word
retrieval on Flores-200 and the word pairs, seed 003: the aligned encoder), :mod:`.msrp` (MSRP,
seed 001 Tables 5-6: the similarity models) and :mod:`.cosine` (a sentence encoder's cosine on
REFreSD dev and STSb across languages, thresholds picked on dev: the graded encoder, ``parasim
bench teach``). Imports no model family.
"""
