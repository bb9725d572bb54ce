"""Model training on the corpus and the synthetic divergences, and the public-set evaluations.

One package per model family, each with its settings, data, model, training, commands (and
report or evaluation where it has one): :mod:`.ranker` (the divergence ranker, seed 000),
:mod:`.s3bert` (AMR-aspect sentence embeddings, seed 002), :mod:`.similarity` (the sentence-pair
classifiers, seed 001), :mod:`.entity_siamese` (the entity-enriched Siamese model, seed 004) and
:mod:`.align_encoder` (the contextually aligned encoder and its word pairs, seed 003). What they
share is in :mod:`.core` (the loop, data loading, model card, metrics, the training side's
encoder loading and pooling); the public sets and their measures in :mod:`.eval` (REFreSD, STS,
CWR, MSRP).

A family imports :mod:`.core`, :mod:`.eval` and the rest of ``parasim``, never another family;
:mod:`.core` and :mod:`.eval` import no family (``tests/train/test_import_rules.py``). So a
workflow rule declares its family's package and the core and eval modules it uses as its code,
and an edit retrains only the models of the family it touches. Importing this package imports
nothing.
"""
