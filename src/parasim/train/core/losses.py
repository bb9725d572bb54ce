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
"""

from __future__ import annotations

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

        embeddings = embed_columns(self.model, sentence_features)
        if len(embeddings) != 3:
            raise ValueError(
                f"GradedRankingLoss: anchor, positive and negative columns, not {len(embeddings)}"
            )
        anchor, positive, negative = embeddings
        return graded_ranking_loss(anchor, positive, negative, labels.view(-1), self.scale)

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}
