"""A ranking loss over the corpus's three grades, for sentence-transformers' trainer.

:class:`GradedRankingLoss` reads (anchor, positive, negative) columns and each negative's grade
as the label (:meth:`parasim.train.core.contrastive.Triples.dataset` with ``with_grades``). It is
CoSENT's loss (Huang et al. 2024, sentence-transformers' ``CoSENTLoss``) over every pair of the
batch, graded: an anchor and its own translation above an anchor and its divergent row, which
is above every unrelated pair (its unrelated hard negative, the other rows of the batch). Unlike
``MultipleNegativesRankingLoss``, whose softmax asks the translation to win against its
divergent row by as much as against an unrelated line, it asks only for the order, and for it
across anchors too: one threshold on the cosine then tells the grades apart, which is what
REFreSD's binary task (and a user thresholding the cosine) asks of the encoder.

:class:`RetainedLoss` adds to either loss a pull of every sentence of the batch back to where the
untrained start puts it (feature distillation to the start, as in Li & Hoiem's "Learning without
Forgetting", 2017, on the sentences themselves): ``retain x scale x mean(1 - cos(model(x),
start(x)))``, so that what the grades teach costs less of what the start knew of other text
(general STS).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from parasim.train.core.contrastive import RANK_EQUIVALENT, RANK_UNRELATED


def graded_ranking_loss(
    anchor: Tensor, positive: Tensor, negative: Tensor, negative_grade: Tensor, scale: float = 20.0
) -> Tensor:
    """The loss from the batch's embeddings (``(B, d)`` each) and each negative's grade (``(B,)``).

    The scored pairs are every anchor against every positive and every negative of the batch:
    an anchor and its own positive are :data:`~parasim.train.core.contrastive.RANK_EQUIVALENT`,
    an anchor and its own negative are that negative's grade, every other pair is
    :data:`~parasim.train.core.contrastive.RANK_UNRELATED`. With ``s`` the cosine times
    ``scale``, the loss is ``log(1 + sum exp(s(k, l) - s(i, j)))`` over the pairs of pairs whose
    grades say ``(i, j)`` > ``(k, l)``; equal grades are not compared.
    """
    a = F.normalize(anchor.float(), dim=-1)
    cands = F.normalize(torch.cat([positive, negative]).float(), dim=-1)
    b = a.shape[0]
    scores = (a @ cands.T) * scale  # (B, 2B): the positives, then the negatives
    grades = torch.full_like(scores, RANK_UNRELATED)
    idx = torch.arange(b, device=scores.device)
    grades[idx, idx] = RANK_EQUIVALENT
    grades[idx, idx + b] = negative_grade.to(scores)
    grades, order = grades.reshape(-1).sort()
    scores = scores.reshape(-1)[order]
    # for each pair, the log-sum of exp(-s) over the pairs of strictly higher grade (the suffix
    # form of CoSENTLoss: no matrix of the pairs of pairs)
    higher = torch.searchsorted(grades, grades, right=True)
    suffix = torch.logcumsumexp(-scores.flip(0), dim=0).flip(0)
    suffix = torch.cat((suffix, scores.new_full((1,), -torch.inf)))
    terms = torch.cat((scores.new_zeros(1), scores + suffix[higher]))
    return torch.logsumexp(terms, dim=0)


class GradedRankingLoss(nn.Module):
    """:func:`graded_ranking_loss` as a sentence-transformers loss: the features of the anchor,
    positive and negative columns, and the negatives' grades as the labels.

    Args:
        model: the ``SentenceTransformer`` being trained.
        scale: the inverse temperature of the cosines (CoSENT's 20).
    """

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__()
        self.model, self.scale = model, scale

    def forward(self, sentence_features, labels: Tensor) -> Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        return self.compute_loss_from_embeddings(
            embed_columns(self.model, sentence_features), labels
        )

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor) -> Tensor:
        """The loss from the columns' embeddings (sentence-transformers' name for it)."""
        if len(embeddings) != 3:
            raise ValueError(
                f"GradedRankingLoss: anchor, positive and negative columns, not {len(embeddings)}"
            )
        anchor, positive, negative = embeddings
        return graded_ranking_loss(anchor, positive, negative, labels.view(-1), self.scale)

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}


def retention_loss(embeddings: Tensor, start: Tensor, weight: float, scale: float) -> Tensor:
    """``weight x scale x mean(1 - cos)`` of each row of ``embeddings`` (``(N, d)``) and the
    same row of ``start`` (the untrained start's embedding of the same sentence)."""
    cos = F.cosine_similarity(embeddings.float(), start.float(), dim=-1)
    return weight * scale * (1.0 - cos).mean()


class RetainedLoss(nn.Module):
    """A ranking loss plus :func:`retention_loss` of every sentence of the batch (every column)
    against a frozen copy of the model as it was when the loss was made (its untrained start).

    The retention's total gradient on the cosines is ``weight x scale``, the ranking loss's at
    most twice its ``scale`` (its pairs' weights are a softmax): ``weight`` 1 gives the two the
    same order of pull. The model trains with dropout and the start runs without (eval mode,
    no gradients), so the term is not 0 at the first step (about 0.2 for e5-small at weight 1:
    it also damps the dropout noise); the start costs one extra forward pass a step.

    Args:
        model: the ``SentenceTransformer`` being trained, still at its start.
        base: the ranking loss (:class:`GradedRankingLoss` or sentence-transformers'
            ``MultipleNegativesRankingLoss``: anything with ``compute_loss_from_embeddings``).
        weight: the retention's weight (> 0).
        scale: the cosines' scale of the retention (the ranking losses' 20).

    Raises:
        ValueError: a ``weight`` not above 0, a ``base`` without ``compute_loss_from_embeddings``.
    """

    def __init__(self, model, base: nn.Module, weight: float, scale: float = 20.0) -> None:
        super().__init__()
        if not weight > 0:
            raise ValueError(f"RetainedLoss: weight above 0, not {weight}")
        if not hasattr(base, "compute_loss_from_embeddings"):
            raise ValueError(f"RetainedLoss: {type(base).__name__} cannot score given embeddings")
        self.model, self.base, self.weight, self.scale = model, base, weight, scale
        start = copy.deepcopy(model)
        start.eval()
        start.requires_grad_(False)
        # not a submodule: the trainer's optimizer, checkpoints and save_pretrained see only the
        # model being trained
        self.__dict__["start"] = start

    def forward(self, sentence_features, labels: Tensor) -> Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        features = list(sentence_features)
        inputs = [dict(f) for f in features]  # the model writes its outputs into the dicts
        embeddings = embed_columns(self.model, features)
        with torch.no_grad():
            start = embed_columns(self.start, inputs)
        ranking = self.base.compute_loss_from_embeddings(embeddings, labels)
        kept = retention_loss(torch.cat(embeddings), torch.cat(start), self.weight, self.scale)
        return ranking + kept

    def get_config_dict(self) -> dict[str, Any]:
        return {"base": type(self.base).__name__, "weight": self.weight, "scale": self.scale}
