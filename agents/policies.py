"""A MaskablePPO policy that scores each candidate placement with one shared network.

GeoPipe's action ``a < Q·K`` launches the job in queue slot ``a // K`` on candidate ``a % K``, and the observation
describes candidate ``a`` in row ``a`` of ``candidates`` (its feasibility, estimated duration, cost, WAN hops,
bandwidth slack, ...) and its job in row ``a // K`` of ``queue``. A flat MLP must learn the same judgement
separately for each of the Q·K rows. :class:`CandidateScoringPolicy` instead gives every row the same scorer:

    score[a]  = mlp([candidate row a, queue row a // K, context])        (shared weights, a < Q·K)
    P(wait)   = sigmoid(linear(context) − max over valid a of score[a])
    P(a)      = (1 − P(wait)) · softmax over the valid launches of score, at a
    context   = tanh(linear([regions, links, global, mean and max of the queue rows]))

so whatever it learns about one slot holds for all of them: reordering the queue slots reorders the logits the
same way and changes nothing else (the context pools the queue). Waiting competes with the best launch, not with
the sum of the launches: with a flat softmax over ``[score, wait]``, forty near-equal launches (a queue of one job
shape, several strategies that find the same placement) would add up to a launch probability that one launch of
the same score would not have, and the probability of waiting would fall with the number of valid actions. The
valid launches are the rows whose ``feasible`` feature is 1, which is what the env's mask says of them. The action
masks of MaskablePPO apply to the logits as usual. The value function is an MLP over the context and all the rows. Select it in a hyperparameter
file with ``policy: CandidateScoringPolicy``; a saved model records the class, so ``load_agent`` needs no option.

Deterministic play takes the mode of the decision, not of the action (:func:`decision_mode`): wait if the policy
gives wait at least the probability of launching anything, else its most probable launch. The argmax over all
actions would wait whenever the launch probability is spread over many valid actions: a young policy that
launches with probability 0.93, split over 56 valid launches of at most 0.024 each, against a wait of 0.07, was
measured to wait at every decision of an episode of GeoPipe-Abundant-v0's world. Sampling (training, ``deterministic=False``) is the
ordinary categorical draw.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from geopipe_env.base.tables import CAND_FEASIBLE
from geopipe_env.decision.observation import CANDIDATE_FEATURES, QUEUE_FEATURES

CONTEXT_KEYS = ("regions", "links", "global")  # plus the pooled queue
ROW_WIDTH = len(CANDIDATE_FEATURES) + len(QUEUE_FEATURES)


def _flat_size(space: spaces.Dict, key: str) -> int:
    return int(np.prod(space[key].shape))


class CandidateFeatures(BaseFeaturesExtractor):
    """``[context (context_dim), row 0, ..., row Q·K−1]`` with row ``a`` = candidate ``a`` ‖ its job's queue row."""

    def __init__(self, observation_space: spaces.Dict, context_dim: int = 64) -> None:
        missing = [k for k in ("candidates", "queue", *CONTEXT_KEYS) if k not in observation_space.spaces]
        if missing:
            raise ValueError(f"CandidateFeatures needs a GeoPipe observation; missing key(s) {', '.join(missing)}")
        self.num_slots = _flat_size(observation_space, "queue") // len(QUEUE_FEATURES)
        self.num_candidates = _flat_size(observation_space, "candidates") // len(CANDIDATE_FEATURES)
        self.num_strategies = self.num_candidates // self.num_slots
        self.context_dim = context_dim
        super().__init__(observation_space, features_dim=context_dim + self.num_candidates * ROW_WIDTH)
        context_in = sum(_flat_size(observation_space, k) for k in CONTEXT_KEYS) + 2 * len(QUEUE_FEATURES)
        self.context = nn.Sequential(nn.Linear(context_in, context_dim), nn.Tanh())

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        batch = observations["candidates"].shape[0]
        cand = observations["candidates"].reshape(batch, self.num_candidates, len(CANDIDATE_FEATURES))
        queue = observations["queue"].reshape(batch, self.num_slots, len(QUEUE_FEATURES))
        rows = torch.cat([cand, queue.repeat_interleave(self.num_strategies, dim=1)], dim=2)
        pooled = [queue.mean(dim=1), queue.max(dim=1).values]  # the same whatever the slot order
        context = self.context(torch.cat([*(observations[k].reshape(batch, -1) for k in CONTEXT_KEYS), *pooled], dim=1))
        return torch.cat([context, rows.reshape(batch, -1)], dim=1)


class CandidateScorer(nn.Module):
    """Action log-probabilities from :class:`CandidateFeatures` (module docstring): a shared MLP scores each row,
    and a linear wait logit competes with the best valid score."""

    def __init__(self, context_dim: int, num_candidates: int, hidden: int = 64) -> None:
        super().__init__()
        self.context_dim = context_dim
        self.num_candidates = num_candidates
        self.score = nn.Sequential(
            nn.Linear(ROW_WIDTH + context_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )
        self.wait = nn.Linear(context_dim, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        batch = features.shape[0]
        context = features[:, : self.context_dim]
        rows = features[:, self.context_dim :].reshape(batch, self.num_candidates, ROW_WIDTH)
        paired = torch.cat([rows, context.unsqueeze(1).expand(batch, self.num_candidates, self.context_dim)], dim=2)
        score = self.score(paired).squeeze(-1)
        # feasible is 1 or 0; VecNormalize's (x − mean) / std keeps 1 above 0 and 0 at or below it, whatever the mean
        valid = rows[:, :, CAND_FEASIBLE] > 0.0
        any_valid = valid.any(dim=1, keepdim=True)
        masked = score.masked_fill(~valid, float("-inf"))
        best = torch.where(any_valid, masked.max(dim=1, keepdim=True).values, torch.zeros_like(score[:, :1]))
        total = torch.where(any_valid, torch.logsumexp(masked, dim=1, keepdim=True), torch.zeros_like(best))
        wait = self.wait(context) - best
        launch = nn.functional.logsigmoid(-wait) + score - total  # log P(a) on the valid rows
        return torch.cat([launch, nn.functional.logsigmoid(wait)], dim=1)


def decision_mode(probs: torch.Tensor) -> torch.Tensor:
    """Per row of action probabilities (wait last, masked actions at 0): wait if ``P(wait) >= P(launch)``, else the
    most probable launch."""
    launch = probs[:, :-1]
    wait = torch.full_like(launch[:, 0], probs.shape[1] - 1, dtype=torch.long)
    return torch.where(probs[:, -1] >= launch.sum(dim=1), wait, launch.argmax(dim=1))


class CandidateScoringPolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy with :class:`CandidateFeatures` and a :class:`CandidateScorer` action head.

    ``policy_kwargs`` may set ``scorer_hidden`` (default 64), ``features_extractor_kwargs`` (``context_dim``) and
    ``net_arch``: a list sizes the value network (default ``[128, 128]``); a dict must keep ``pi`` empty, so that
    the head sees the features unchanged.
    """

    def __init__(self, *args: Any, scorer_hidden: int = 64, **kwargs: Any) -> None:
        self.scorer_hidden = scorer_hidden
        kwargs.setdefault("features_extractor_class", CandidateFeatures)
        net_arch = kwargs.get("net_arch") or [128, 128]
        if isinstance(net_arch, list):  # a plain list sizes the value network
            net_arch = {"pi": [], "vf": list(net_arch)}
        if not isinstance(net_arch, dict) or net_arch.get("pi"):
            raise ValueError("CandidateScoringPolicy: net_arch must be a list (the value network) or {pi: [], vf: [...]}")
        kwargs["net_arch"] = net_arch
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        features = self.features_extractor
        n_actions = int(self.action_space.n)
        if n_actions != features.num_candidates + 1:
            raise ValueError(f"CandidateScoringPolicy: {n_actions} actions, expected Q·K + 1 = {features.num_candidates + 1}")
        self.action_net = CandidateScorer(features.context_dim, features.num_candidates, self.scorer_hidden)
        if self.ortho_init:
            self.action_net.apply(partial(self.init_weights, gain=np.sqrt(2)))
            self.action_net.score[-1].apply(partial(self.init_weights, gain=0.01))  # near-uniform first policy
            self.action_net.wait.apply(partial(self.init_weights, gain=0.01))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _predict(self, observation, deterministic: bool = False, action_masks: np.ndarray | None = None) -> torch.Tensor:
        distribution = self.get_distribution(observation, action_masks)
        if deterministic:
            return decision_mode(distribution.distribution.probs)
        return distribution.get_actions(deterministic=False)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "scorer_hidden": self.scorer_hidden}


# Policy names a hyperparameter file may use besides SB3's own ("MultiInputPolicy", ...).
CUSTOM_POLICIES: dict[str, type[MaskableActorCriticPolicy]] = {"CandidateScoringPolicy": CandidateScoringPolicy}
