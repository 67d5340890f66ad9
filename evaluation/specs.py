"""What an evaluation runs: envs (registered ids or scenario files) and policies (by spec), checked before any
episode.

A policy *spec* is one word of ``geopipe-evaluate --policies``:

* a scripted policy's name (:func:`geopipe_baselines.make_policy`), or a name registered by another package in the
  entry-point group ``geopipe.policies`` (a policy class or factory);
* ``module:Class`` or ``path/to/file.py:Class``: an instance of your own class that follows the policy protocol
  (``geopipe_baselines.policy.Policy``), built with no arguments;
* anything a *policy source* registered in the group ``geopipe.policies`` accepts: an object with ``accepts(spec)``,
  ``load(spec)``, ``defaults()`` (the specs an evaluation runs by default) and ``unavailable()`` (why it cannot load
  now, or None). The ``geopipe_agents`` package registers one for saved agents (an SB3 ``.zip`` or an RLlib checkpoint
  folder), with the shipped agent as its default;
* ``label=SPEC``: SPEC, named ``label`` in tables and files (two runs' ``best_model.zip`` side by side).

The harness finds learned policies only through the entry points, so it never imports the ``geopipe_agents`` package.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_baselines import make_policy, policy_names
from geopipe_baselines.policy import DEFAULT_SEED_START, Policy
from geopipe_env.env import EnvArgumentError, GeoPipeEnv
from geopipe_env.scenario.loader import check_number, load_scenario

DEFAULT_ENV_ID = "GeoPipe-v0"
SCENARIO_SUFFIXES = (".yaml", ".yml")
ENTRY_POINT_GROUP = "geopipe.policies"


class EvaluationInputError(ValueError):
    """A policy, agent file, env id or scenario file that cannot be evaluated; the message says why."""


# ---------------------------------------------------------------------------------------------------- envs
@dataclass(frozen=True, slots=True)
class EnvSpec:
    """What to ``gym.make``: a registered env id, or ``GeoPipe-v0`` on a scenario file."""

    label: str  # as given on the command line; names the env in tables and files
    env_id: str
    scenario: str | None = None

    @property
    def slug(self) -> str:
        """A file-name-safe prefix for this env's plots."""
        stem = Path(self.scenario).stem if self.scenario is not None else self.env_id
        return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "env"

    def make(self, cost_weight: float | None = None, **policy_kwargs: Any) -> gym.Env:
        """The env, with ``cost_weight`` (None: the scenario's) and the policy's extra kwargs."""
        kwargs = {} if self.scenario is None else {"scenario": self.scenario}
        if cost_weight is not None:
            kwargs["cost_weight"] = cost_weight
        return gym.make(self.env_id, **kwargs, **policy_kwargs)


def parse_env(arg: str) -> EnvSpec:
    """An :class:`EnvSpec` from a command-line argument: a path ending in .yaml/.yml, else an env id."""
    if arg.lower().endswith(SCENARIO_SUFFIXES):
        return EnvSpec(label=arg, env_id=DEFAULT_ENV_ID, scenario=arg)
    return EnvSpec(label=arg, env_id=arg)



# ---------------------------------------------------------------------------------------------------- policies
class PolicySource(Protocol):
    """Where some policy specs come from (registered in the entry-point group ``geopipe.policies``)."""

    def accepts(self, spec: str) -> bool:
        """Whether ``spec`` is one of this source's (e.g. a saved agent's path)."""

    def load(self, spec: str) -> Policy:
        """A fresh policy for ``spec``."""

    def defaults(self) -> list[str]:
        """The specs an evaluation runs when no policy is named."""

    def unavailable(self) -> str | None:
        """Why this source cannot load policies now (e.g. a missing extra, with how to install it), or None."""


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, each once: a package seen twice (an installed copy and the ``*.egg-info`` that an
    editable install leaves in the source folder, found when the folder is on ``sys.path``) lists its entry points
    twice."""
    seen = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        seen.setdefault((ep.name, ep.value), ep)
    return list(seen.values())


def policy_sources() -> list[PolicySource]:
    """The registered policy sources, in name order."""
    loaded = (ep.load() for ep in sorted(_entry_points(), key=lambda ep: ep.name))
    return [obj for obj in loaded if callable(getattr(obj, "accepts", None))]


def registered_policies() -> dict[str, Callable[[], Policy]]:
    """Policy factories other packages registered by name (entry points that are not sources)."""
    out = {}
    for ep in _entry_points():
        obj = ep.load()
        if not callable(getattr(obj, "accepts", None)):
            out[ep.name] = obj
    return out


def split_label(spec: str) -> tuple[str | None, str]:
    """``(label, spec)`` of ``label=spec``, or ``(None, spec)``."""
    label, sep, rest = spec.partition("=")
    if sep and label and rest and not any(c in label for c in "/\\:"):
        return label, rest
    return None, spec


def source_of(spec: str) -> PolicySource | None:
    """The registered source that accepts ``spec`` (its label removed), if any."""
    _, spec = split_label(spec)
    return next((source for source in policy_sources() if source.accepts(spec)), None)


def portable_spec(spec: str) -> str:
    """``spec`` with its file (a saved agent, or the ``.py`` of ``file.py:Class``) as an absolute path: a worker's
    working folder differs from the driver's (on another node, the same paths must exist there)."""
    label, rest = split_label(spec)
    where, sep, name = rest.rpartition(":")
    if not (sep and where.endswith(".py")):
        where, sep, name = rest, "", ""
    if Path(where).exists():
        where = str(Path(where).resolve())
    rest = where + sep + name
    return f"{label}={rest}" if label else rest


def source_loaded(specs: Sequence[str]) -> list[str]:
    """The names (label, else file name) of the specs that an available policy source loads from an existing path:
    saved agents, whose loading imports torch and reads the model, several seconds where a scripted policy takes
    milliseconds (a missing file, or a source that cannot load now, fails at once)."""
    names = []
    for spec in specs:
        label, rest = split_label(spec)
        if is_scripted(spec) or not Path(rest).exists():
            continue
        source = source_of(spec)
        if source is not None and source.unavailable() is None:
            names.append(label or Path(rest).name)
    return names


def is_scripted(spec: str) -> bool:
    """Whether ``spec`` names a scripted policy of this package (the comparisons' baselines)."""
    return split_label(spec)[1] in policy_names(include_slow=True)


def _from_class(spec: str) -> Policy:
    """An instance of ``module:Class`` or ``path/file.py:Class``."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise EvaluationInputError(f"policy {spec!r}: no file {where}")
        module_name = f"_geopipe_policy_{re.sub(r'[^0-9a-zA-Z_]', '_', str(path))}"
        module = sys.modules.get(module_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[module_name] = module
            loader_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:  # a module in the folder the command runs from, as `python -m` finds it
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise EvaluationInputError(f"policy {spec!r}: cannot import {where} ({exc})") from exc
    cls = getattr(module, name, None)
    if cls is None:
        raise EvaluationInputError(f"policy {spec!r}: {where} has no {name}")
    return cls()


class _OwnPolicy:
    """A class of one's own that has ``act(obs, info)`` but not the whole protocol: its name defaults to the class's
    name, its ``env_kwargs`` to none, and ``reset(env)`` to nothing."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.name = str(getattr(policy, "name", type(policy).__name__))
        self.env_kwargs = dict(getattr(policy, "env_kwargs", None) or {})

    def reset(self, env: Any) -> None:
        reset = getattr(self.policy, "reset", None)
        if reset is not None:
            reset(env)

    def act(self, obs: dict, info: dict) -> int:
        return self.policy.act(obs, info)


def _check_protocol(policy: Any, spec: str) -> Policy:
    """``policy`` itself when it follows the protocol, an :class:`_OwnPolicy` around it when it has ``act`` but not the
    rest; a class without ``act`` is one error."""
    if not callable(getattr(policy, "act", None)):
        raise EvaluationInputError(
            f"policy {spec!r} does not follow the policy protocol: it has no act(obs, info) (see geopipe_baselines.policy.Policy)"
        )
    if all(hasattr(policy, a) for a in ("name", "env_kwargs", "reset")):
        return policy
    return _OwnPolicy(policy)


def build_policy(spec: str, load: bool = True) -> Policy | None:
    """A fresh policy from a spec (see the module docstring). With ``load=False`` a spec that a policy source
    (a saved agent) would load is only checked to be loadable, and None is returned: nothing heavy is imported.

    Raises:
        EvaluationInputError: a spec that names nothing, or a class that does not follow the policy protocol.
        ValueError, ImportError, FileNotFoundError: from a source that cannot load its spec.
    """
    label, spec = split_label(spec)
    registered = registered_policies()
    if spec in policy_names(include_slow=True):
        policy = make_policy(spec)
    elif spec in registered:
        policy = registered[spec]()
    elif (source := source_of(spec)) is not None:
        why = source.unavailable()
        if why:
            raise EvaluationInputError(f"policy {spec!r}: {why}")
        if not load:
            return None
        policy = source.load(spec)
    elif ":" in spec:
        policy = _from_class(spec)
    else:
        make_policy(spec)  # raises ValueError naming the valid names
    policy = _check_protocol(policy, spec)
    if label is not None:
        policy.name = label
    return policy


def default_policy_specs() -> tuple[list[str], list[str]]:
    """Every scripted policy (aliases left out), then the registered sources' defaults (the shipped agent); and a
    note per source left out because it cannot load now."""
    specs, notes = list(policy_names(include_aliases=False)), []
    for source in policy_sources():
        why = source.unavailable()
        if why:
            left_out = ", ".join(Path(spec).name for spec in source.defaults())
            notes.append(f"{left_out} is left out of the default policies: {why}")
        else:
            specs += source.defaults()
    return specs, notes


def check_at_once(envs: Sequence[EnvSpec], policy_specs: Sequence[str], cost_weight: float | None = None) -> None:
    """The checks that need neither torch nor the compiled kernels, so that bad input is refused in about a second
    on any machine: the cost weight is in range, every env id is registered, every scenario file loads, and every
    policy spec names a scripted or registered policy, a saved agent whose source can load it, or a class of one's
    own that can be built.

    Raises:
        EvaluationInputError: the first input that fails, in one line.
    """
    if cost_weight is not None:
        with _input_errors():
            check_number(cost_weight, "cost_weight", minimum=0.0, error=EnvArgumentError)
    for env_spec in envs:
        with _input_errors():
            if env_spec.scenario is not None:
                load_scenario(env_spec.scenario)
            else:
                gym.spec(env_spec.env_id)
    for spec in policy_specs:
        with _input_errors():
            build_policy(spec, load=False)


def check_inputs(envs: Sequence[EnvSpec], policy_specs: Sequence[str], cost_weight: float | None) -> list[str]:
    """Build every policy and every (env, policy) pair once; return the policies' names.

    Raises:
        EvaluationInputError: an unknown policy name, a missing or broken agent file, an unknown env id, an env
            that is not a GeoPipe env, a bad scenario file, or an agent trained on another observation space.
    """
    slugs = [e.slug for e in envs]
    if len(set(slugs)) < len(slugs):
        raise EvaluationInputError(f"two envs share the plot prefix in {', '.join(slugs)}; rename a scenario file")
    names = []
    for spec in policy_specs:
        with _input_errors():
            policy = build_policy(spec)
        for env_spec in envs:
            with _input_errors():
                env = env_spec.make(cost_weight, **policy.env_kwargs)
            try:
                if not isinstance(env.unwrapped, GeoPipeEnv):
                    raise EvaluationInputError(f"{env_spec.label} is not a GeoPipe env (got {type(env.unwrapped).__name__})")
                with _input_errors():
                    policy.reset(env)
            finally:
                env.close()
        names.append(policy.name)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise EvaluationInputError(f"more than one policy is named {', '.join(duplicated)}; give each once")
    return names


@contextmanager
def _input_errors() -> Iterator[None]:
    """Re-raise input errors (ScenarioError, ObservationSpaceMismatch, NameNotFound, a kwarg an env does not take,
    an agent without the ``[train]`` extra installed, ...) as EvaluationInputError."""
    try:
        yield
    except (ValueError, TypeError, FileNotFoundError, ImportError, gym.error.Error) as exc:
        raise EvaluationInputError(str(exc)) from exc


def held_out_warning(seeds: Sequence[int]) -> str | None:
    """A one-line warning when some seeds lie below :data:`DEFAULT_SEED_START`, where training draws its seeds."""
    low = [s for s in seeds if s < DEFAULT_SEED_START]
    if not low:
        return None
    return (
        f"seeds {low[0]}..{low[-1]} lie below {DEFAULT_SEED_START}, among the training seeds; "
        f"a trained agent may have seen those episodes (use --seed-start {DEFAULT_SEED_START} or above for held-out results)"
    )


