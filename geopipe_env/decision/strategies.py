"""Layer 5: the candidate strategies, declared once.

Each strategy is a :class:`Strategy`: its name and either its compiled code in
:mod:`geopipe_env.decision.candidate_kernels` (every built-in strategy) or its Python rule (a strategy a user
registers). Three strategies are *selectors*: the best of the pooled strategies' placements and of every single
region that holds the job, by a figure of the candidate (estimated duration, cost or carbon). The built-in rules
written plainly in Python, and the candidate table they give (``tests/reference_placement.py`` and
``candidate_row`` in ``tests/reference.py``), are the specification ``tests/test_candidate_kernels.py`` holds the
compiled code to, decision for decision; they do not ship.

A registered strategy (:func:`register_strategy`) runs its Python rule before the compiled table of the others
(``decision.CompiledBackend``), which describes its placement as it does theirs, so it costs only its rule's time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from geopipe_env.decision import candidate_kernels as ck
from geopipe_env.simulation.core_types import CandidateInfo, Job, Placement
from geopipe_env.decision.placement import PlacementContext

NO_TWIN = -1  # the code of a registered strategy (a Python rule, no compiled code)


class Strategy(NamedTuple):
    """A candidate strategy.

    Attributes:
        name: its name in ``gym.make(..., strategies=[...])``.
        rule: a registered strategy's Python rule, ``(PlacementContext, Job) -> Placement | None``; None for a
            built-in strategy (compiled) and for a selector.
        code: its compiled code (``candidate_kernels``), or :data:`NO_TWIN` for a registered strategy.
        selects: for a selector, the figure of a candidate it minimises (the lowest pool position wins ties).
        pooled: whether the selectors choose among its placements.
    """

    name: str
    rule: Callable[[PlacementContext, Job], Placement | None] | None
    code: int = NO_TWIN
    selects: Callable[[CandidateInfo], float] | None = None
    pooled: bool = False


# The built-in strategies, all compiled. The pooled ones come first, in the order of their codes (the compiled pool's
# order), then the selectors, then BACE-Pipe's ablations (not pooled and not default slots).
BUILT_IN: tuple[Strategy, ...] = (
    Strategy("bace-pipe", None, ck.BACE_PIPE, pooled=True),
    Strategy("cr-lcf", None, ck.CR_LCF, pooled=True),
    Strategy("cr-ldf", None, ck.CR_LDF, pooled=True),
    Strategy("lcf", None, ck.LCF, pooled=True),
    Strategy("ldf", None, ck.LDF, pooled=True),
    Strategy("fastest", None, ck.FASTEST, selects=lambda c: c.duration_s),
    Strategy("cheapest", None, ck.CHEAPEST, selects=lambda c: c.cost_usd),
    Strategy("greenest", None, ck.GREENEST, selects=lambda c: c.carbon_kg),
    Strategy("bace-pipe-no-pathfinder", None, ck.BACE_PIPE_NO_PATHFINDER),
    Strategy("bace-pipe-no-costmin", None, ck.BACE_PIPE_NO_COSTMIN),
)
# The default K candidate slots, in slot order: the pooled strategies and the selectors (not the ablations).
STRATEGY_NAMES: tuple[str, ...] = tuple(s.name for s in BUILT_IN if s.pooled or s.selects is not None)

_REGISTRY: dict[str, Strategy] = {s.name: s for s in BUILT_IN}


def strategy(name: str) -> Strategy:
    """The registered strategy called ``name`` (KeyError if none)."""
    return _REGISTRY[name]


def strategy_names() -> tuple[str, ...]:
    """Every strategy an env accepts now: the built-in ones and those added by :func:`register_strategy`."""
    return tuple(_REGISTRY)


def is_built_in(name: str) -> bool:
    """Whether ``name`` is a built-in strategy (whose feasibility does not depend on prices)."""
    return any(s.name == name for s in BUILT_IN)


def register_strategy(name: str, rule: Callable[[PlacementContext, Job], Placement | None]) -> None:
    """Make ``rule`` available as a candidate strategy (``gym.make(..., strategies=[..., name])``).

    A rule returns a :class:`Placement` of exactly ``job.num_stages`` stages that the cluster can hold now, or
    None (a placement it cannot hold stops the env with a ValueError naming the strategy). It runs in Python; the
    compiled table describes its placement as it does the other strategies'. Registration is per process: a
    worker process must register it too (e.g. when your module is imported).
    """
    if name in _REGISTRY:
        raise ValueError(f"strategy {name!r} exists already")
    _REGISTRY[name] = Strategy(name, rule)


def compiled_codes(strategies: Sequence[str]) -> list[int]:
    """Each strategy's compiled twin's code, :data:`NO_TWIN` for those without one."""
    return [_REGISTRY[name].code for name in strategies]


def named_placement(ctx: PlacementContext, job: Job, name: str) -> Placement | None:
    """The placement of ``job`` under the registered strategy ``name`` at this decision, memoised per job profile:
    jobs of one profile share it."""
    key = (job.profile_key, name)
    if key not in ctx.named:
        ctx.named[key] = _REGISTRY[name].rule(ctx, job)
    return ctx.named[key]
