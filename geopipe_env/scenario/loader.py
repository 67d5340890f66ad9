"""Layer 3: load a scenario file (YAML, schema v1) into a validated, frozen :class:`Scenario`.

It sits above the physics because rejecting a world where a job could never run needs the sizing rule.

Every key is read through its declaration in :mod:`geopipe_env.scenario.format` (which sections allow it, its type,
range or choices, and its default); this module adds the rules that tie keys together. All checks happen here, at
load time: a bad file raises :class:`ScenarioError`, naming the offending key path and what was
expected, and never fails later inside the simulator.

Unit conversions on load: ``horizon_h`` → seconds, ``latency_ms`` (one-way) → seconds,
``mean_interarrival_h`` → seconds, bundled prices USD/MWh → USD/kWh, ``start_utc`` → hour of 2023.
"""

from __future__ import annotations

import csv
import difflib
import math
import numbers
import os
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from geopipe_env.scenario import bundled
from geopipe_env.scenario import format as format_
from geopipe_env.base.catalog import (
    DATASET_CATALOG,
    GPU_CATALOG,
    MODEL_CATALOG,
    DatasetSpec,
    GpuType,
    ModelSpec,
)
from geopipe_env.physics import schedule as schedules
from geopipe_env.physics.pipeline import runnable_stages
from geopipe_env.physics.schedule import SCHEDULES
from geopipe_env.scenario.types import (
    HOURS_PER_YEAR,
    SIZING_FIXED,
    SIZING_KSTAR,
    ArrivalSpec,
    BackgroundTraffic,
    CapacityLossSpec,
    FailureSpec,
    LinkDegradation,
    HourlySeries,
    JobClass,
    JobShape,
    NetworkSpec,
    RandomizeSpec,
    RegionSpec,
    Scenario,
    TraceJob,
    WorkloadSpec,
    powers_of_two,
)
from geopipe_env.scenario.format import (
    DEFAULT_START_UTC,
    PRICE_UNITS,
    REQUIRED,
    SCHEMA_VERSION,
    SECTIONS,
    Key,
)
from geopipe_env.physics.sizing import connected_components, linked_regions, size_job
from geopipe_env.base.units import SECONDS_PER_MS, seconds_from_hours

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "data" / "scenarios"
REFERENCE_YEAR = 2023  # the year of the bundled hourly series; start_utc maps any year onto it
TRACE_COLUMNS = format_.trace_columns()
NUM_LISTED_CHOICES = 8  # how many valid names an error message lists before "…"

_MISSING = object()


class KeyedValueError(ValueError):
    """A value that breaks a rule, said in one line: ``<key path>: <problem>; expected <what>``.

    Attributes:
        key_path: where the value is, e.g. ``"regions[1].num_gpus"`` or an env argument's name.
        problem: what is wrong with it.
        expected: what would have been accepted.
    """

    def __init__(self, key_path: str, problem: str, expected: str) -> None:
        self.key_path = key_path
        self.problem = problem
        self.expected = expected
        super().__init__(f"{key_path}: {problem}; expected {expected}")

    def __reduce__(self):
        # Keep the error picklable (e.g. raised inside a SubprocVecEnv worker) despite the 3-argument __init__.
        return type(self), (self.key_path, self.problem, self.expected)


class ScenarioError(KeyedValueError):
    """A scenario file (or dict) that does not follow the schema.

    Its ``key_path`` is where the problem is, e.g. ``"regions[1].num_gpus"``, ``"network.matrix.eu-west.us-east"``;
    for a file that cannot be read or parsed, the file's path.
    """


# ---------------------------------------------------------------------------------------------------------
# Typed reading with key paths
# ---------------------------------------------------------------------------------------------------------


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return repr(value)


def _choices(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:NUM_LISTED_CHOICES])
    return shown + (f", … ({len(names)} in total)" if len(names) > NUM_LISTED_CHOICES else "")


def did_you_mean(word: Any, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the name among ``names`` closest to ``word`` (or equal to it but for case),
    else an empty string."""
    names = list(names)
    match = difflib.get_close_matches(str(word), names, n=1)
    if not match:
        folded = {n.casefold(): n for n in names}
        match = [folded[str(word).casefold()]] if str(word).casefold() in folded else []
    return f" (did you mean {match[0]!r}?)" if match else ""


def _range_text(minimum: float | None, exclusive: bool, maximum: float | None) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if exclusive else '>='} {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return " and ".join(parts)


def check_number(
    value: Any,
    path: str,
    minimum: float | None = None,
    exclusive: bool = False,
    maximum: float | None = None,
    error: type[KeyedValueError] = ScenarioError,
) -> float:
    """A finite real number (never a bool) within the given bounds; ``error`` otherwise."""
    bounds = _range_text(minimum, exclusive, maximum)
    expected = "a finite number" + (f" {bounds}" if bounds else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(path, f"got {_describe(value)}", expected)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise error(path, f"got {number}", expected)
    too_low = minimum is not None and (number <= minimum if exclusive else number < minimum)
    if too_low or (maximum is not None and number > maximum):
        raise error(path, f"got {number:g}", expected)
    return number


def check_integer(value: Any, path: str, minimum: int | None = 1, error: type[KeyedValueError] = ScenarioError) -> int:
    """An integer (never a bool or a float) of at least ``minimum``; ``error`` otherwise."""
    expected = "an integer" + (f" >= {minimum}" if minimum is not None else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(path, f"got {_describe(value)}", expected)
    if minimum is not None and value < minimum:
        raise error(path, f"got {int(value)}", expected)
    return int(value)


def check_string(
    value: Any, path: str, choices: Sequence[str] | None = None, error: type[KeyedValueError] = ScenarioError
) -> str:
    """A non-empty string, one of ``choices`` if given; ``error`` otherwise (suggesting the closest choice)."""
    expected = f"one of {_choices(choices)}" if choices else "a non-empty string"
    if not isinstance(value, str) or not value.strip():
        raise error(path, f"got {_describe(value)}", expected)
    if choices and value not in choices:
        raise error(path, f"unknown value {value!r}{did_you_mean(value, choices)}", expected)
    return value


class _Section:
    """A mapping from the file of a declared section (:data:`geopipe_env.scenario.format.SECTIONS`), with its key
    path; rejects undeclared keys on construction (and keys outside ``allowed``, where the context narrows them)."""

    def __init__(self, value: Any, path: str, section: str, allowed: Sequence[str] | None = None) -> None:
        self.declared: dict[str, Key] = {k.name: k for k in SECTIONS[section]}
        allowed = tuple(self.declared) if allowed is None else allowed
        if not isinstance(value, dict):
            raise ScenarioError(
                path or "<root>", f"got {_describe(value)}", f"a mapping with keys {', '.join(allowed)}"
            )
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                raise ScenarioError(
                    _join(path, str(key)), f"unknown key{did_you_mean(key, allowed)}", f"one of {', '.join(allowed)}"
                )
        self.data = value
        self.path = path

    def at(self, key: str) -> str:
        return _join(self.path, key)

    def get(self, key: str, default: Any = REQUIRED, exclusive: bool | None = None) -> Any:
        """The value of a scalar key, checked as declared: its type, range or choices. Absent (or null), it is the
        declared default, or ``default`` where the context sets one (:data:`REQUIRED`: the key must be given);
        ``exclusive`` where the context makes a declared minimum strict."""
        declared = self.declared[key]
        if default is REQUIRED:
            default = _MISSING if declared.required else declared.default
        kind = declared.kind
        if kind == "number":
            strict = declared.exclusive if exclusive is None else exclusive
            return self.number(key, default, declared.minimum, strict, declared.maximum)
        if kind == "integer":
            return self.integer(key, default, declared.minimum)
        if kind == "boolean":
            return self.boolean(key, default)
        if kind in ("string", "choice"):
            return self.string(key, default, declared.choice_names() or None)
        raise TypeError(f"{self.at(key)} holds a {kind}, not a scalar")

    def has(self, key: str) -> bool:
        """Whether the key is given; an explicit ``null`` counts as not given (use the default)."""
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = _MISSING, what: str = "a value") -> Any:
        if self.has(key):
            return self.data[key]
        if default is _MISSING:
            raise ScenarioError(self.at(key), "got null" if key in self.data else "missing", what)
        return default

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        minimum: float | None = None,
        exclusive: bool = False,
        maximum: float | None = None,
    ) -> float:
        if not self.has(key) and default is not _MISSING:
            return default
        bounds = _range_text(minimum, exclusive, maximum)
        value = self.raw(key, what="a finite number" + (f" {bounds}" if bounds else ""))
        return check_number(value, self.at(key), minimum, exclusive, maximum)

    def integer(self, key: str, default: Any = _MISSING, minimum: int | None = 1) -> int:
        if not self.has(key) and default is not _MISSING:
            return default
        value = self.raw(key, what="an integer" + (f" >= {minimum}" if minimum is not None else ""))
        return check_integer(value, self.at(key), minimum)

    def string(self, key: str, default: Any = _MISSING, choices: Sequence[str] | None = None) -> str:
        if not self.has(key) and default is not _MISSING:
            return default
        value = self.raw(key, what=f"one of {_choices(choices)}" if choices else "a non-empty string")
        return check_string(value, self.at(key), choices)

    def boolean(self, key: str, default: Any) -> bool:
        if not self.has(key) and default is not _MISSING:
            return default
        if not self.has(key):
            self.raw(key, what="true or false")
        value = self.data[key]
        if not isinstance(value, bool):
            raise ScenarioError(self.at(key), f"got {_describe(value)}", "true or false")
        return value

    def section(self, key: str, required: bool | None = None) -> _Section | None:
        """The mapping under ``key``, of its declared section; None if absent and not required (as declared, unless
        ``required`` is given)."""
        declared = self.declared[key]
        if not self.has(key):
            if declared.required if required is None else required:
                raise ScenarioError(self.at(key), "missing", f"a mapping with keys {', '.join(format_.keys(declared.keys))}")
            return None
        return _Section(self.data[key], self.at(key), declared.keys)

    def items(self, key: str, what: str, allow_empty: bool = False) -> list[tuple[str, Any]]:
        """The elements of a list under ``key``, each with its key path."""
        value = self.raw(key, what=f"a list of {what}")
        if not isinstance(value, list):
            raise ScenarioError(self.at(key), f"got {_describe(value)}", f"a list of {what}")
        if not value and not allow_empty:
            raise ScenarioError(self.at(key), "the list is empty", f"at least one entry: {what}")
        return [(_join(self.at(key), i), item) for i, item in enumerate(value)]


# ---------------------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------------------


def builtin_names() -> tuple[str, ...]:
    """Names of the scenarios shipped in ``geopipe_env/data/scenarios/`` (file stems), sorted."""
    return tuple(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))


def load_builtin(name: str) -> Scenario:
    """Load a shipped scenario by name, e.g. ``"geopipe-v0"`` or ``"paper"``."""
    names = builtin_names()
    if name not in names:
        raise ScenarioError(
            str(name), f"no built-in scenario of that name{did_you_mean(name, names)}", f"one of {_choices(names)}"
        )
    return load_scenario(SCENARIO_DIR / f"{name}.yaml")


def load_scenario(source: str | os.PathLike | dict) -> Scenario:
    """Build a validated :class:`Scenario` from a YAML file path or an already-parsed dict.

    Relative paths inside the scenario (a trace CSV) are resolved against the YAML file's folder, or against
    the working directory for a dict.

    Raises:
        ScenarioError: the one exception type for any bad input, naming the offending key path.
    """
    if isinstance(source, dict):
        return _build(_resolve_extends(source, Path.cwd(), ()), base_dir=Path.cwd(), default_name="scenario")
    if not isinstance(source, (str, os.PathLike)):
        raise ScenarioError("<source>", f"got {_describe(source)}", "a path to a YAML file or a dict")
    path = Path(source)
    if not path.exists():
        names = builtin_names()
        close = difflib.get_close_matches(path.stem if path.suffix.lower() in (".yaml", ".yml") else path.name, names, n=3)
        hint = ""
        if close:
            quoted = [repr(n) for n in close]
            hint = f" (did you mean {quoted[0] if len(quoted) == 1 else ', '.join(quoted[:-1]) + ' or ' + quoted[-1]}?)"
        raise ScenarioError(
            str(source), f"file not found, nor a built-in scenario name{hint}", f"a scenario YAML file or one of {_choices(names)}"
        )
    data = _resolve_extends(_read_yaml(path), path.parent, (path.resolve(),))
    return _build(data, base_dir=path.parent, default_name=path.stem)


def _resolve_extends(data: Any, base_dir: Path, chain: tuple[Path, ...]) -> Any:
    """Apply ``extends: <built-in name or path>``: the base file's content, deep-merged with this one's.

    Mappings merge key by key (recursively); any other value, lists included, replaces the base's. A relative
    base path is resolved against the extending file's folder; a file path inside the base (a key declared
    ``relative_path``) keeps the base's folder (:func:`_anchored`).
    """
    if not isinstance(data, dict) or "extends" not in data:
        return data
    ref = data["extends"]
    if not isinstance(ref, str) or not ref:
        raise ScenarioError("extends", f"got {_describe(ref)}", "a built-in scenario name or a path to a YAML file")
    path = SCENARIO_DIR / f"{ref}.yaml" if ref in builtin_names() else base_dir / ref
    if not path.is_file():
        raise ScenarioError(
            "extends", f"no scenario {ref!r}{did_you_mean(ref, builtin_names())}", f"one of {_choices(builtin_names())} or a YAML file"
        )
    if path.resolve() in chain:
        raise ScenarioError("extends", f"{ref!r} extends itself (through {len(chain)} file(s))", "a chain without cycles")
    base = _resolve_extends(_read_yaml(path), path.parent, (*chain, path.resolve()))
    if not isinstance(base, dict):
        raise ScenarioError("extends", f"{ref!r} is not a mapping", "a scenario file")
    return _deep_merge(_anchored(base, path.parent), {k: v for k, v in data.items() if k != "extends"})


def _anchored(data: Any, folder: Path, section: str = "top") -> Any:
    """``data`` (a scenario file's content, or a part of it that ``section`` declares) with every file path of a
    key declared ``relative_path`` made absolute against ``folder``, the folder of the file that wrote it; the rest
    is left as it is (the loader checks it later)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for declared in format_.SECTIONS[section]:
        value = out.get(declared.name)
        if declared.relative_path and isinstance(value, str):
            out[declared.name] = str(folder / value)
        elif declared.kind == "section" and declared.keys:
            out[declared.name] = _anchored(value, folder, declared.keys)
        elif declared.kind == "items" and declared.keys and isinstance(value, list):
            out[declared.name] = [_anchored(item, folder, declared.keys) for item in value]
    return out


def _deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class StrictYamlLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate mapping keys instead of silently keeping the last one."""


def _construct_mapping(loader: StrictYamlLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    # Duplicates are checked among the keys written in this mapping; a key that overrides one merged in with
    # ``<<: *anchor`` is legal YAML and is not a duplicate.
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=deep)


StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# PyYAML follows YAML 1.1, which reads ``1e6`` and ``2.0e8`` as strings; accept them as floats, as YAML 1.2 does.
StrictYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), "file not found", "a path to a scenario YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), f"cannot read the file ({exc})", "a readable UTF-8 YAML file") from None
    try:
        return yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(str(path), f"malformed YAML{where}: {problem}", "valid YAML (schema v1)") from None


# ---------------------------------------------------------------------------------------------------------
# Building the scenario
# ---------------------------------------------------------------------------------------------------------

def _build(data: Any, base_dir: Path, default_name: str) -> Scenario:
    root = _Section(data, "", "top")
    if root.has("version"):
        check_integer(root.data["version"], "version", minimum=None)
        if root.data["version"] != SCHEMA_VERSION:
            raise ScenarioError(
                "version", f"got {root.data['version']}", f"{SCHEMA_VERSION} (this loader reads schema v1)"
            )
    name = root.get("name", default=default_name)
    horizon_h = root.get("horizon_h")
    start_hour = _start_hour(root.raw("start_utc", default=DEFAULT_START_UTC), "start_utc")
    mfu = root.get("mfu")
    schedule = root.get("pipeline_schedule")
    virtual_stages = root.get("virtual_stages")
    bill_idle = root.get("bill_idle_capacity")

    gpu_types = _gpu_types(root)
    network_section = root.section("network")
    rule = network_section.get("rule")
    regions = _regions(root, gpu_types, rule, base_dir)
    network = _network(network_section, regions, rule)
    workload, checks = _workload(root.section("workload"), base_dir)
    randomize = _randomize(root.section("randomize"), gpu_types, workload)
    if mfu is None:
        _check_calibrated(regions, randomize)
    objective = root.section("objective")
    cost_weight = (objective or _Section({}, "objective", "objective")).get("cost_weight")

    scenario = Scenario(
        name=name,
        horizon_s=seconds_from_hours(horizon_h),
        start_hour=start_hour,
        mfu=mfu,
        regions=regions,
        network=network,
        workload=workload,
        randomize=randomize,
        cost_weight=cost_weight,
        bill_idle_capacity=bill_idle,
        pipeline_schedule=schedule,
        virtual_stages=virtual_stages,
        failures=_failures(root.section("failures")),
        capacity_loss=_capacity_loss(root.section("capacity_loss"), root),
    )
    _check_feasible(scenario, checks)
    return scenario


def _failures(section: _Section | None) -> FailureSpec | None:
    """The ``failures`` section, with hours as seconds; None when absent (nothing fails)."""
    if section is None:
        return None
    interval_h = section.get("checkpoint_interval_h")
    return FailureSpec(
        per_gpu_day=section.get("per_gpu_day"),
        checkpoint_interval_s=None if interval_h is None else seconds_from_hours(interval_h),
        checkpoint_gbps=section.get("checkpoint_gbps"),
        restart_s=section.get("restart_s"),
        repair_s=seconds_from_hours(section.get("repair_h")),
    )


def _capacity_loss(section: _Section | None, root: _Section) -> CapacityLossSpec | None:
    """The ``capacity_loss`` section, with hours as seconds; None when absent. Interrupted jobs need the
    checkpoints and restarts of ``failures``."""
    if section is None:
        return None
    if not root.has("failures"):
        raise ScenarioError(
            section.path, "given without failures", "a failures section too (its checkpoints and restarts; per_gpu_day: 0 for no failures)"
        )
    return CapacityLossSpec(
        per_region_day=section.get("per_region_day"),
        fraction=section.get("fraction"),
        duration_s=seconds_from_hours(section.get("duration_h")),
        notice_s=section.get("notice_s"),
    )


def _check_calibrated(regions: tuple[RegionSpec, ...], randomize: RandomizeSpec) -> None:
    """Without ``mfu`` every GPU a world can draw needs a kernel efficiency (catalog or ``gpus`` override)."""
    used = [(f"regions[{i}].gpu", r.gpu) for i, r in enumerate(regions)]
    used += [(f"randomize.gpu_types[{i}]", g) for i, g in enumerate(randomize.gpu_types or ())]
    for path, gpu in used:
        if gpu.kernel_efficiency is None:
            raise ScenarioError(
                "mfu",
                f"missing, and GPU {gpu.name!r} ({path}) has no kernel efficiency to time it by",
                f"mfu (an end-to-end efficiency in (0, 1]), or gpus.{gpu.name}.kernel_efficiency (a GPU type that "
                "published runs calibrate: " + ", ".join(n for n, g in GPU_CATALOG.items() if g.kernel_efficiency) + ")",
            )


def _start_hour(value: Any, path: str) -> int | None:
    """``"random"`` → None; an ISO 8601 UTC time → its hour of the 2023 calendar (month/day/hour kept)."""
    expected = 'an ISO 8601 time on a whole hour such as "2023-03-01T00:00Z", or "random"'
    if value == "random":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        text = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ScenarioError(path, f"cannot parse {value!r}", expected) from None
    else:
        raise ScenarioError(path, f"got {_describe(value)}", expected)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    if (moment.minute, moment.second, moment.microsecond) != (0, 0, 0):
        raise ScenarioError(path, f"{value!r} is not on a whole hour", expected)
    if (moment.month, moment.day) == (2, 29):
        raise ScenarioError(path, f"{value!r} is 29 February, which the 2023 series lacks", expected)
    in_reference_year = moment.replace(year=REFERENCE_YEAR)
    return int((in_reference_year - datetime(REFERENCE_YEAR, 1, 1)).total_seconds() // 3600)


_GPU_FIELDS = tuple(k.name for k in SECTIONS["gpu"] if k.required)  # what a new GPU must give


def _gpu_types(root: _Section) -> dict[str, GpuType]:
    """The catalog merged with the scenario's ``gpus`` overrides, keyed by case-folded name."""
    types = {key.casefold(): gpu for key, gpu in GPU_CATALOG.items()}
    raw = root.raw("gpus", default={})
    if not isinstance(raw, dict):
        raise ScenarioError(
            "gpus", f"got {_describe(raw)}", "a mapping from GPU name to {tflops, memory_gb, busy_watts, idle_watts}"
        )
    seen: dict[str, str] = {}
    for key, spec in raw.items():
        path = _join("gpus", str(key))
        name = check_string(key, path)
        if name.casefold() in seen:
            raise ScenarioError(
                path, f"the same GPU as {seen[name.casefold()]!r} (names are case-insensitive)", "each GPU once"
            )
        seen[name.casefold()] = name
        section = _Section(spec, path, "gpu")
        base = types.get(name.casefold())
        # Overriding a catalog GPU may give any subset of its fields.
        fields = {field: section.get(field, default=REQUIRED if base is None else getattr(base, field)) for field in section.declared}
        if fields["idle_watts"] > fields["busy_watts"]:
            raise ScenarioError(
                section.at("idle_watts"),
                f"{fields['idle_watts']:g} W exceeds busy_watts {fields['busy_watts']:g} W",
                "idle_watts <= busy_watts",
            )
        types[name.casefold()] = GpuType(base.name if base else name, **fields)
    return types


def _regions(root: _Section, gpu_types: dict[str, GpuType], rule: str, base_dir: Path) -> tuple[RegionSpec, ...]:
    regions = []
    ids: dict[str, str] = {}
    gpu_names = sorted({g.name for g in gpu_types.values()})
    for path, item in root.items("regions", "region mappings {id, gpu, num_gpus, …}"):
        section = _Section(item, path, "region")
        region_id = section.get("id")
        if region_id in ids:
            raise ScenarioError(
                section.at("id"), f"duplicate region id {region_id!r} (also {ids[region_id]})", "unique region ids"
            )
        ids[region_id] = path
        gpu_name = section.get("gpu")
        if gpu_name.casefold() not in gpu_types:
            raise ScenarioError(
                section.at("gpu"),
                f"unknown GPU type {gpu_name!r}{did_you_mean(gpu_name, gpu_names)}",
                f"one of {_choices(gpu_names)}, or one defined under gpus",
            )
        if rule == "endpoint_mean":  # the links' capacities follow from it
            access = section.get("access_bandwidth_gbps", default=_MISSING, exclusive=True)
        else:
            access = section.get("access_bandwidth_gbps")
        regions.append(
            RegionSpec(
                id=region_id,
                gpu=gpu_types[gpu_name.casefold()],
                num_gpus=section.get("num_gpus"),
                access_bandwidth_gbps=access,
                pue=section.get("pue"),
                price_usd_per_kwh=_price(section, base_dir),
                carbon_g_per_kwh=_carbon(section),
            )
        )
    return tuple(regions)


def _one_of(section: _Section, keys: tuple[str, ...], required: bool) -> str | None:
    """Which of ``keys`` is given (the first is the constant, the rest hourly series); two is an error, and so is
    none when ``required``."""
    expected = f"exactly one of {keys[0]} (a constant) or " + " or ".join(f"{k} (an hourly series)" for k in keys[1:])
    given = [k for k in keys if section.has(k)]
    if len(given) > 1:
        raise ScenarioError(section.at(given[1]), f"given together with {given[0]}", expected)
    if given:
        return given[0]
    if required:
        raise ScenarioError(section.at(keys[0]), "missing", expected)
    return None


def _bundled(section: _Section, key: str, kind: str) -> str:
    """A bundled series name from ``key`` (its declared choices), or a ScenarioError listing the bundled names."""
    names = section.declared[key].choice_names()
    name = section.string(key)
    if name not in names:
        raise ScenarioError(
            section.at(key), f"unknown {kind} {name!r}{did_you_mean(name, names)}", f"a bundled {kind.split()[-1]}: {_choices(names)}"
        )
    return name


def _price(section: _Section, base_dir: Path) -> HourlySeries:
    which = _one_of(section, ("price_usd_per_kwh", "price_market", "price_csv"), required=True)
    if which == "price_usd_per_kwh":
        return HourlySeries.constant(section.get("price_usd_per_kwh"))
    if which == "price_csv":
        return _price_csv(section.section("price_csv", required=True), base_dir)
    return bundled.price_series(_bundled(section, "price_market", "market"))


# A price whose typical magnitude falls outside these bounds is almost surely in the other unit.
_PLAUSIBLE_MEDIAN_USD_PER_KWH = (0.001, 5.0)


def _price_csv(section: _Section, base_dir: Path) -> HourlySeries:
    """A user's hourly price series: one value per UTC hour of a whole (non-leap) year, in a declared unit.

    The CSV has a ``datetime_utc`` column (hour-beginning, ISO 8601) and the named value column. Rows must run
    hour by hour from 1 January 00:00 for 8760 hours, with no gap, repeat or empty cell.
    """
    path = section.at("path")
    unit = section.get("unit")
    column = section.get("column")
    file = base_dir / section.get("path")
    expected_columns = f"columns datetime_utc and {column}"
    rows = _read_csv(path, file, expected_columns)
    header = [cell.strip() for cell in rows[0]]
    if "datetime_utc" not in header or column not in header:
        missing = [c for c in ("datetime_utc", column) if c not in header]
        raise ScenarioError(path, f"{file.name} lacks column(s) {', '.join(missing)}", expected_columns)
    t_col, v_col = header.index("datetime_utc"), header.index(column)
    body = [(line, row) for line, row in enumerate(rows[1:], start=2) if any(cell.strip() for cell in row)]
    expected_rows = "8760 consecutive hourly rows from 1 January 00:00 UTC (one non-leap year)"
    values = np.empty(len(body))
    for hour, (line, row) in enumerate(body):
        where = f"{file.name} line {line}"
        stamp = row[t_col].strip() if t_col < len(row) else ""
        at = _start_hour(stamp, f"{path}[{hour}].datetime_utc")
        if at != hour:
            problem = "a gap before it" if at is not None and at > hour else "a repeated or out-of-order hour"
            raise ScenarioError(path, f"{where}: {stamp!r} is hour {at} of the year where hour {hour} was due ({problem})", expected_rows)
        text = row[v_col].strip() if v_col < len(row) else ""
        try:
            values[hour] = float(text)
        except ValueError:
            values[hour] = math.nan
        if not math.isfinite(values[hour]):
            raise ScenarioError(path, f"{where}: {column} is {text!r}", "a finite price in every row")
    if len(body) != HOURS_PER_YEAR:
        raise ScenarioError(path, f"{file.name} has {len(body)} hourly rows", expected_rows)
    prices = values * PRICE_UNITS[unit]
    low, high = _PLAUSIBLE_MEDIAN_USD_PER_KWH
    median = float(np.median(np.abs(prices)))
    if not low <= median <= high:
        other = "usd_per_kwh" if unit == "usd_per_mwh" else "usd_per_mwh"
        raise ScenarioError(
            section.at("unit"),
            f"{unit} makes the median price {median:.4g} USD/kWh, outside {low}–{high}: the file looks like {other}",
            "the unit the file's values are in",
        )
    return HourlySeries(f"csv:{file.name}:{column}", prices)


def _carbon(section: _Section) -> HourlySeries | None:
    which = _one_of(section, ("carbon_g_per_kwh", "carbon_zone"), required=False)
    if which is None:
        return None
    if which == "carbon_g_per_kwh":
        return HourlySeries.constant(section.get("carbon_g_per_kwh"))
    return bundled.carbon_series(_bundled(section, "carbon_zone", "carbon zone"))


def _network(section: _Section, regions: tuple[RegionSpec, ...], rule: str) -> NetworkSpec:
    ids = [r.id for r in regions]
    num_regions = len(ids)
    bandwidth_gbps = np.zeros((num_regions, num_regions))  # (R, R); 0 = no link
    latency_s = np.zeros((num_regions, num_regions))  # (R, R); 0 where there is no link
    if rule == "endpoint_mean":
        default_latency_s = section.get("default_latency_ms") * SECONDS_PER_MS
        access = np.array([r.access_bandwidth_gbps for r in regions])
        bandwidth_gbps = (access[:, None] + access[None, :]) / 2.0
        latency_s = np.full((num_regions, num_regions), default_latency_s)
        np.fill_diagonal(bandwidth_gbps, 0.0)
        np.fill_diagonal(latency_s, 0.0)
    elif section.has("default_latency_ms"):
        raise ScenarioError(
            section.at("default_latency_ms"), "has no effect under rule matrix", "latency_ms on every matrix pair"
        )

    entries = _matrix_entries(section, ids, rule)
    if rule == "matrix" and num_regions > 1 and not section.has("matrix"):
        raise ScenarioError(
            section.at("matrix"),
            "missing",
            "a matrix of {bandwidth_gbps, latency_ms} per region pair under rule matrix",
        )
    for (i, j), (bw, lat) in entries.items():
        # A pair given in one direction only holds for both; a pair given both ways keeps each direction.
        for a, b in [(i, j)] if (j, i) in entries else [(i, j), (j, i)]:
            latency_s[a, b] = lat
            if bw is not None:
                bandwidth_gbps[a, b] = bw

    intra = section.section("intra_region") or _Section({}, section.at("intra_region"), "intra_region")
    intra_bw = intra.get("bandwidth_gbps")
    intra_lat_ms = intra.get("latency_ms")

    background = None
    bg = section.section("background")
    if bg is not None:
        background = BackgroundTraffic(
            mean_fraction=bg.get("mean_fraction"),
            amplitude_fraction=bg.get("amplitude_fraction"),
            period_h=bg.get("period_h"),
            phase_h=bg.get("phase_h"),
        )
    bandwidth_gbps.flags.writeable = False
    latency_s.flags.writeable = False
    degradation = None
    dg = section.section("degradation")
    if dg is not None:
        degradation = LinkDegradation(
            per_link_day=dg.get("per_link_day"), factor=dg.get("factor"),
            duration_s=seconds_from_hours(dg.get("duration_h")),
        )
    return NetworkSpec(
        rule=rule,
        bandwidth_gbps=bandwidth_gbps,
        latency_s=latency_s,
        intra_bandwidth_gbps=intra_bw,
        intra_latency_s=intra_lat_ms * SECONDS_PER_MS,
        background=background,
        degradation=degradation,
    )


def _matrix_entries(section: _Section, ids: list[str], rule: str) -> dict[tuple[int, int], tuple[float | None, float]]:
    """The pairs given under ``network.matrix``: (src, dst) index → (bandwidth_gbps or None, latency_s)."""
    entries: dict[tuple[int, int], tuple[float | None, float]] = {}
    if not section.has("matrix"):
        return entries
    matrix = section.data["matrix"]
    path = section.at("matrix")
    if not isinstance(matrix, dict):
        raise ScenarioError(path, f"got {_describe(matrix)}", "a mapping {src: {dst: {bandwidth_gbps, latency_ms}}}")
    pair_keys = ("bandwidth_gbps", "latency_ms") if rule == "matrix" else ("latency_ms",)
    for src, row in matrix.items():
        src_path = _join(path, str(src))
        if src not in ids:
            raise ScenarioError(
                src_path, f"unknown region {src!r}{did_you_mean(src, ids)}", f"a region id: {_choices(ids)}"
            )
        if not isinstance(row, dict):
            raise ScenarioError(src_path, f"got {_describe(row)}", "a mapping {dst: {bandwidth_gbps, latency_ms}}")
        for dst, spec in row.items():
            dst_path = _join(src_path, str(dst))
            if dst not in ids:
                raise ScenarioError(
                    dst_path, f"unknown region {dst!r}{did_you_mean(dst, ids)}", f"a region id: {_choices(ids)}"
                )
            if dst == src:
                raise ScenarioError(
                    dst_path, "a link from a region to itself", "two different regions (use network.intra_region)"
                )
            if rule == "endpoint_mean" and isinstance(spec, dict) and "bandwidth_gbps" in spec:
                raise ScenarioError(
                    _join(dst_path, "bandwidth_gbps"),
                    "a pair bandwidth under rule endpoint_mean (it is the mean of the access bandwidths)",
                    "only latency_ms here, or rule: matrix",
                )
            pair = _Section(spec, dst_path, "link", pair_keys)
            bandwidth = pair.get("bandwidth_gbps") if rule == "matrix" else None
            latency = pair.get("latency_ms") * SECONDS_PER_MS
            entries[(ids.index(src), ids.index(dst))] = (bandwidth, latency)
    return entries


# Keys that set a job's shape, at the workload level (the default job), in a job class or as trace columns.
_SHAPE = {k.name: k for k in format_.SHAPE_KEYS}
TRACE_SHAPE_COLUMNS = format_.trace_shape_columns()

_Raw = dict[str, tuple[Any, str]]  # shape key → (value as written, its key path)


def _raw_shape(section: _Section) -> _Raw:
    """The shape keys a section gives, with their key paths."""
    return {key: (section.data[key], section.at(key)) for key in _SHAPE if section.has(key)}


def _override(base: _Raw, over: _Raw) -> _Raw:
    """``base`` with ``over``'s keys on top; a key of an exclusive pair drops its partner from ``base``."""
    merged = dict(base)
    for pair in format_.EXCLUSIVE_SHAPE_KEYS:
        if any(key in over for key in pair):
            for key in pair:
                merged.pop(key, None)
    merged.update(over)
    return merged


def _shape(raw: _Raw, where: str) -> JobShape:
    """Validate shape keys into a :class:`JobShape`; ``where`` names the section for errors about a pair of keys."""

    def integer(key: str) -> int | None:
        if key not in raw:
            return _SHAPE[key].default
        value, path = raw[key]
        return check_integer(value, path, minimum=_SHAPE[key].minimum)

    for first, second in format_.EXCLUSIVE_SHAPE_KEYS:
        if first in raw and second in raw:
            raise ScenarioError(
                raw[second][1], f"given together with {first} ({raw[first][1]})", f"either {first} or {second}"
            )
    b = integer("micro_batch_size")
    d = integer("data_parallel")
    m = integer("num_microbatches")
    global_batch = integer("global_batch_size")
    if global_batch is not None:
        if global_batch % (b * d):
            raise ScenarioError(
                raw["global_batch_size"][1],
                f"{global_batch} sequences do not split into micro-batches of {b} over {d} replicas "
                f"(micro_batch_size × data_parallel = {b * d})",
                f"a multiple of {b * d}",
            )
        m = global_batch // (b * d)
    sizing = _SHAPE["pipeline_sizing"].default
    if "pipeline_sizing" in raw:
        sizing = check_string(raw["pipeline_sizing"][0], raw["pipeline_sizing"][1], _SHAPE["pipeline_sizing"].choice_names())
    stages = integer("pipeline_stages")
    if stages is not None:
        sizing = SIZING_FIXED
    names: tuple[str, ...] = ()
    if "pipeline_schedule" in raw:
        names = (check_string(raw["pipeline_schedule"][0], raw["pipeline_schedule"][1], SCHEDULES),)
    if "pipeline_schedules" in raw:
        value, path = raw["pipeline_schedules"]
        if not isinstance(value, list) or not value:
            raise ScenarioError(path, f"got {_describe(value)}", f"a non-empty list of schedules: {_choices(SCHEDULES)}")
        names = tuple(check_string(item, _join(path, i), SCHEDULES) for i, item in enumerate(value))
        if len(set(names)) != len(names):
            raise ScenarioError(path, "a schedule is listed twice", "each accepted schedule once")
    recompute = _SHAPE["recompute"].default
    if "recompute" in raw:
        recompute = raw["recompute"][0]
        if not isinstance(recompute, bool):
            raise ScenarioError(raw["recompute"][1], f"got {_describe(recompute)}", "true or false")
    optimizer_state = _SHAPE["optimizer_state"].default
    if "optimizer_state" in raw:
        optimizer_state = check_string(raw["optimizer_state"][0], raw["optimizer_state"][1],
                                       _SHAPE["optimizer_state"].choice_names())
    return JobShape(
        micro_batch_size=b,
        seq_len=integer("seq_len"),
        num_microbatches=m,
        gpus_per_stage=integer("gpus_per_stage"),
        data_parallel=d,
        sizing=sizing,
        pipeline_stages=stages,
        max_stages=integer("max_stages"),
        pipeline_schedules=names,
        virtual_stages=integer("virtual_stages"),
        context_parallel=integer("context_parallel"),
        recompute=recompute,
        optimizer_state=optimizer_state,
    )


def _job_classes(
    section: _Section, base: _Raw, models: list[tuple[str, ModelSpec]], datasets: list[DatasetSpec]
) -> tuple[list[JobClass], list[tuple[JobShape, list[tuple[str, ModelSpec]], str]]]:
    """The workload's job classes, and per class (shape, its models with their key paths, the class's key path)."""
    classes, checks = [], []
    names: set[str] = set()
    for path, item in section.items("job_classes", "job class mappings {name, weight, models, ...}"):
        entry = _Section(item, path, "job_class")
        name = entry.get("name", default=f"class-{len(classes)}")
        if name in names:
            raise ScenarioError(entry.at("name"), f"duplicate class name {name!r}", "a name used by one class only")
        names.add(name)
        weight = entry.get("weight")
        class_models = models
        if entry.has("models"):
            class_models = [(p, _model(m, p, default_name=f"{name}-model-{i}")) for i, (p, m) in enumerate(
                entry.items("models", "catalog keys or {name, params_b, layers, hidden}"))]
        elif not class_models:
            raise ScenarioError(entry.at("models"), "missing", "the class's models (or workload.models for every class)")
        class_datasets = datasets
        if entry.has("datasets"):
            class_datasets = [_dataset(d, p) for p, d in entry.items("datasets", "catalog keys or {name, tokens}")]
        elif not class_datasets:
            raise ScenarioError(entry.at("datasets"), "missing", "the class's datasets (or workload.datasets for every class)")
        shape = _shape(_override(base, _raw_shape(entry)), path)
        classes.append(JobClass(name, weight, tuple(m for _, m in class_models), tuple(class_datasets), shape))
        checks.append((shape, class_models, path))
    return classes, checks


def _workload(section: _Section, base_dir: Path) -> tuple[WorkloadSpec, list[tuple[JobShape, list[tuple[str, ModelSpec]], str]]]:
    """The workload recipe, and the feasibility checks it needs: per job shape, its models (each with the key path
    that introduced it) and the key path of the shape."""
    arrival = section.section("arrival")
    process = arrival.get("process")
    mean_interarrival_s = 0.0
    timed = process in ("poisson", "replay")
    if timed:
        mean_interarrival_s = seconds_from_hours(arrival.get("mean_interarrival_h", default=_MISSING))
    elif arrival.has("mean_interarrival_h"):
        raise ScenarioError(
            arrival.at("mean_interarrival_h"), f"has no effect with process {process}", "it only with process: poisson or replay"
        )
    source = None
    if process == "replay":
        source = arrival.get("source", default=_MISSING)
    elif arrival.has("source"):
        raise ScenarioError(arrival.at("source"), f"has no effect with process {process}", "it only with process: replay")
    is_trace = process == "trace"
    has_classes = section.has("job_classes")
    if is_trace and has_classes:
        raise ScenarioError(
            section.at("job_classes"), "given with arrival process trace", "shapes per row (trace columns) with a trace"
        )

    models: list[tuple[str, ModelSpec]] = []
    if section.has("models") or not (is_trace or has_classes):
        items = section.items("models", "catalog keys or {name, params_b, layers, hidden}")
        models = [(p, _model(m, p, default_name=f"model-{i}")) for i, (p, m) in enumerate(items)]
    datasets: list[DatasetSpec] = []
    if section.has("datasets") or not (is_trace or has_classes):
        datasets = [_dataset(d, p) for p, d in section.items("datasets", "catalog keys or {name, tokens}")]
    base = _raw_shape(section)
    shape = _shape(base, section.path)
    checks = [(shape, models, "workload")]

    classes: list[JobClass] = []
    trace: tuple[TraceJob, ...] = ()
    if is_trace:
        rows = _trace(section.section("trace", required=True), base_dir, [m for _, m in models], datasets, base)
        num_jobs = section.get("num_jobs", default=len(rows))
        if num_jobs > len(rows):
            raise ScenarioError(
                section.at("num_jobs"), f"{num_jobs} jobs but the trace has {len(rows)} rows", f"at most {len(rows)}"
            )
        rows = rows[:num_jobs]
        trace = tuple(job for _, job in rows)
        # Trace models and datasets missing from the lists are appended, in order of use.
        for row_path, job in rows:
            if job.model not in (m for _, m in models):
                models.append((f"{row_path}.model", job.model))
            if job.dataset is not None and job.dataset not in datasets:
                datasets.append(job.dataset)
            if job.shape is not None:
                checks.append((job.shape, [(f"{row_path}.model", job.model)], row_path))
        checks[0] = (shape, [(p, m) for p, m in models if any(j.shape is None and j.model == m for j in trace)], "workload")
    else:
        if section.has("trace"):
            raise ScenarioError(
                section.at("trace"),
                f"given with arrival process {process}",
                "a trace only with arrival: {process: trace}",
            )
        num_jobs = section.get("num_jobs", default=_MISSING)
        if source is not None:
            _check_replay_length(section.at("num_jobs"), num_jobs, source)
        if has_classes:
            classes, checks = _job_classes(section, base, models, datasets)
            for _, class_models, _ in checks:  # every model and dataset of the classes, listed once
                models += [(p, m) for p, m in class_models if m not in (known for _, known in models)]
            for job_class in classes:
                datasets += [d for d in job_class.datasets if d not in datasets]

    workload = WorkloadSpec(
        num_jobs=num_jobs,
        arrival=ArrivalSpec(process=process, mean_interarrival_s=mean_interarrival_s, source=source),
        models=tuple(m for _, m in models),
        datasets=tuple(datasets),
        micro_batch_size=shape.micro_batch_size,
        seq_len=shape.seq_len,
        num_microbatches=shape.num_microbatches,
        gpus_per_stage=shape.gpus_per_stage,
        epochs=section.get("epochs"),
        max_stages=shape.max_stages,
        trace=trace,
        data_parallel=shape.data_parallel,
        pipeline_sizing=shape.sizing if shape.sizing != SIZING_FIXED else SIZING_KSTAR,
        pipeline_stages=shape.pipeline_stages,
        classes=tuple(classes),
        pipeline_schedules=shape.pipeline_schedules,
        virtual_stages=shape.virtual_stages,
        context_parallel=shape.context_parallel,
        recompute=shape.recompute,
        optimizer_state=shape.optimizer_state,
    )
    return workload, checks


def _catalog_entry(item: str, path: str, catalog: dict[str, Any], kind: str, inline: str) -> Any:
    """A catalog entry by case-insensitive key, or a ScenarioError naming the valid keys."""
    key = item.casefold()
    if key not in catalog:
        raise ScenarioError(
            path, f"unknown {kind} {item!r}{did_you_mean(key, catalog)}", f"a catalog key ({_choices(catalog)}) or {inline}"
        )
    return catalog[key]


def _model(item: Any, path: str, default_name: str) -> ModelSpec:
    if isinstance(item, str):
        return _catalog_entry(item, path, MODEL_CATALOG, "model", "{params_b, layers, hidden}")
    section = _Section(item, path, "model")
    return ModelSpec(
        name=section.get("name", default=default_name),
        params_b=section.get("params_b"),
        layers=section.get("layers"),
        hidden=section.get("hidden"),
    )


def _dataset(item: Any, path: str) -> DatasetSpec:
    if isinstance(item, str):
        return _catalog_entry(item, path, DATASET_CATALOG, "dataset", "{name, tokens}")
    section = _Section(item, path, "dataset")
    return DatasetSpec(
        name=section.get("name"),
        tokens=section.get("tokens"),
        source="inline in the scenario file",
    )


def _lookup(name: str, listed: list, catalog: dict) -> Any:
    """A trace's model / dataset name: the workload's own entries first (by name), then the catalog."""
    for spec in listed:
        if spec.name.casefold() == name.casefold():
            return spec
    return catalog.get(name.casefold())


def _read_csv(path: str, file: Path, expected_columns: str) -> list[list[str]]:
    """A CSV file's rows (header first); any problem reading it is a ScenarioError at ``path``."""
    try:
        with open(file, newline="", encoding="utf-8-sig") as f:  # -sig: tolerate a spreadsheet's BOM
            rows = list(csv.reader(f))
    except FileNotFoundError:
        raise ScenarioError(
            path, f"file {str(file)!r} not found", "a CSV path relative to the scenario file's folder"
        ) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ScenarioError(path, f"cannot read {str(file)!r} ({exc})", f"a UTF-8 CSV with {expected_columns}") from None
    if not rows:
        raise ScenarioError(path, f"{file.name} is empty", f"a header row with {expected_columns}")
    return rows


def _trace(
    section: _Section, base_dir: Path, models: list[ModelSpec], datasets: list[DatasetSpec], base: _Raw
) -> list[tuple[str, TraceJob]]:
    """The trace CSV's rows as (key path, job), sorted by submission time (stable).

    A row's key path is ``workload.trace.csv[i]`` with ``i`` its 0-based index among the file's non-blank data rows.
    Optional columns (``TRACE_SHAPE_COLUMNS``) give a row its own shape on top of the workload's keys; an empty
    cell keeps the workload's value.
    """
    path = section.at("csv")
    file = base_dir / section.get("csv")
    expected_columns = (
        "columns submit_time_s, model, and dataset or iterations (optional: " + ", ".join(TRACE_SHAPE_COLUMNS) + ")"
    )
    rows = _read_csv(path, file, expected_columns)
    header = [cell.strip() for cell in rows[0]]
    for column in header:
        if column not in TRACE_COLUMNS:
            raise ScenarioError(
                path, f"{file.name} has unknown column {column!r}{did_you_mean(column, TRACE_COLUMNS)}", expected_columns
            )
    missing = [c for c in ("submit_time_s", "model") if c not in header]
    if not ("dataset" in header or "iterations" in header):
        missing.append("dataset or iterations")
    if missing:
        raise ScenarioError(path, f"{file.name} lacks column(s) {', '.join(missing)}", expected_columns)
    body = [(line, row) for line, row in enumerate(rows[1:], start=2) if any(cell.strip() for cell in row)]
    if not body:
        raise ScenarioError(path, f"{file.name} has no job rows", "at least one job row")

    jobs = []
    for index, (line, row) in enumerate(body):
        row_path = f"{path}[{index}]"
        where = f"{file.name} line {line}"
        if len(row) != len(header):
            raise ScenarioError(
                row_path, f"{where} has {len(row)} cells for {len(header)} columns", "one cell per column"
            )
        cells = {column: cell.strip() for column, cell in zip(header, row, strict=True)}
        try:
            submit_time_s = float(cells["submit_time_s"])
        except ValueError:
            submit_time_s = math.nan
        if not math.isfinite(submit_time_s) or submit_time_s < 0.0:
            raise ScenarioError(
                f"{row_path}.submit_time_s",
                f"{where}: got {cells['submit_time_s']!r}",
                "a finite number of seconds >= 0",
            )
        model = _lookup(cells["model"], models, MODEL_CATALOG) if cells["model"] else None
        if model is None:
            names = [m.name for m in models] + list(MODEL_CATALOG)
            raise ScenarioError(
                f"{row_path}.model",
                f"{where}: unknown model {cells['model']!r}{did_you_mean(cells['model'], names)}",
                f"a catalog key or a workload.models name: {_choices(names)}",
            )
        dataset_name, iterations_text = cells.get("dataset", ""), cells.get("iterations", "")
        if bool(dataset_name) == bool(iterations_text):
            raise ScenarioError(
                row_path,
                f"{where} gives {'both' if dataset_name else 'neither'} dataset and iterations",
                "exactly one of dataset or iterations per row",
            )
        dataset, iterations = None, None
        if dataset_name:
            dataset = _lookup(dataset_name, datasets, DATASET_CATALOG)
            if dataset is None:
                names = [d.name for d in datasets] + list(DATASET_CATALOG)
                raise ScenarioError(
                    f"{row_path}.dataset",
                    f"{where}: unknown dataset {dataset_name!r}{did_you_mean(dataset_name, names)}",
                    f"one of {_choices(names)}",
                )
        else:
            try:
                iterations = int(iterations_text)
            except ValueError:
                iterations = 0
            if iterations < 1:
                raise ScenarioError(f"{row_path}.iterations", f"{where}: got {iterations_text!r}", "an integer >= 1")
        own: _Raw = {}
        for column in TRACE_SHAPE_COLUMNS:
            if not cells.get(column):
                continue
            if column == "pipeline_schedule":
                own[column] = (cells[column], f"{row_path}.{column}")
                continue
            try:
                own[column] = (int(cells[column]), f"{row_path}.{column}")
            except ValueError:
                raise ScenarioError(
                    f"{row_path}.{column}", f"{where}: got {cells[column]!r}", "an integer >= 1"
                ) from None
        shape = _shape(_override(base, own), row_path) if own else None
        jobs.append((row_path, TraceJob(submit_time_s, model, dataset, iterations, shape)))
    return sorted(jobs, key=lambda row: row[1].submit_time_s)


def _randomize(section: _Section | None, gpu_types: dict[str, GpuType], workload: WorkloadSpec) -> RandomizeSpec:
    if section is None:
        return RandomizeSpec()
    ranges: dict[str, Any] = {}
    for key, declared in section.declared.items():
        if declared.kind in ("range", "int_range"):
            ranges[key] = _range(section, key, integer=declared.kind == "int_range")
        elif declared.kind == "number":
            ranges[key] = section.get(key)
    if section.has("gpu_types"):
        names = []
        for path, name in section.items("gpu_types", "GPU names"):
            check_string(name, path)
            if name.casefold() not in gpu_types:
                known = sorted(g.name for g in gpu_types.values())
                raise ScenarioError(path, f"unknown GPU {name!r}{did_you_mean(name, known)}", f"one of {_choices(known)}")
            names.append(gpu_types[name.casefold()])
        ranges["gpu_types"] = tuple(names)
    process = workload.arrival.process
    for key, processes in (("arrival_scale", ("poisson", "replay")), ("batch_arrival_prob", ("poisson",))):
        if ranges[key] is not None and process not in processes:
            raise ScenarioError(
                section.at(key), f"the workload's arrival process is {process!r}", f"workload.arrival.process: {' or '.join(processes)}"
            )
    for key in ("data_parallel", "seq_len"):
        if ranges[key] is not None and not powers_of_two(ranges[key]):
            low, high = ranges[key]
            raise ScenarioError(section.at(key), f"no power of two lies in [{low}, {high}]",
                                "a range holding at least one power of two")
    if ranges["num_jobs"] is not None and process == "trace":
        raise ScenarioError(section.at("num_jobs"), "the jobs come from a trace", "a poisson or batch workload")
    if ranges["num_jobs"] is not None and workload.arrival.source is not None:
        _check_replay_length(section.at("num_jobs"), ranges["num_jobs"][1], workload.arrival.source)
    return RandomizeSpec(**ranges)


def _check_replay_length(path: str, num_jobs: int, source: str) -> None:
    """A replay of ``num_jobs`` jobs takes ``num_jobs + 1`` consecutive jobs of its trace (one gap before each)."""
    available = len(bundled.job_trace(source)) - 1
    if num_jobs > available:
        raise ScenarioError(path, f"{num_jobs} jobs, but the {source} trace holds {available + 1}", f"at most {available}")


def _range(section: _Section, key: str, integer: bool = False) -> tuple | None:
    """``[low, high]`` under ``key`` (positive numbers, or integers >= 1), low <= high; None if not given."""
    if not section.has(key):
        return None
    value, path = section.data[key], section.at(key)
    what = "a list [low, high] of two integers >= 1" if integer else "a list [low, high] of two positive numbers"
    if not isinstance(value, list) or len(value) != 2:
        raise ScenarioError(path, f"got {_describe(value)}", what)
    if integer:
        low, high = (check_integer(v, _join(path, i), minimum=1) for i, v in enumerate(value))
    else:
        low, high = (check_number(v, _join(path, i), minimum=0.0, exclusive=True) for i, v in enumerate(value))
    if low > high:
        raise ScenarioError(path, f"low {low:g} > high {high:g}", "[low, high] with low <= high")
    return (low, high)


# ---------------------------------------------------------------------------------------------------------
# Cross-field feasibility: every job must be placeable on the world, or the file is rejected
# ---------------------------------------------------------------------------------------------------------


def _fleets_to_check(scenario: Scenario) -> list[tuple[str, np.ndarray, tuple[GpuType, ...]]]:
    """(key path, GPU counts, GPU types) of the fleets to check: as given; at the low end of
    ``randomize.gpu_scale`` (rounded as the generator does); and, with ``randomize.gpu_types``, each listed type in
    every region, at the low end of the scale."""
    counts = [r.num_gpus for r in scenario.regions]
    types = tuple(r.gpu for r in scenario.regions)
    fleets = [("", np.array(counts), types)]
    rand = scenario.randomize
    if rand.gpu_scale is not None:
        counts = [max(1, int(round(n * rand.gpu_scale[0]))) for n in counts]
        fleets.append(("randomize.gpu_scale", np.array(counts), types))
    for gpu in rand.gpu_types or ():
        fleets.append(("randomize.gpu_types", np.array(counts), (gpu,) * len(counts)))
    return fleets


def _fleet_text(scale_path: str, gpus: tuple[GpuType, ...]) -> str:
    if scale_path == "randomize.gpu_types":
        return f" when every region draws {gpus[0].name}"
    return " at the low end of the GPU scale" if scale_path else ""


def _check_feasible(scenario: Scenario, checks: list[tuple[JobShape, list[tuple[str, ModelSpec]], str]]) -> None:
    """Reject a world in which some job of the workload could never be placed.

    Fewer GPUs only make placement harder, so checking the low end of ``gpu_scale`` covers every episode's counts.
    With ``gpu_types``, each listed type is checked alone in every region.
    """
    bandwidth = scenario.network.bandwidth_gbps
    components, linked = connected_components(bandwidth), linked_regions(bandwidth)
    for scale_path, counts, gpus in _fleets_to_check(scenario):
        for shape, models, shape_path in checks:
            if not models:
                continue
            if shape.stage_gpus > max(counts):
                cp = f" × {shape.context_parallel} context-parallel" if shape.context_parallel > 1 else ""
                raise ScenarioError(
                    scale_path or _join(shape_path, "data_parallel" if shape.data_parallel > 1 else "gpus_per_stage"),
                    f"a stage takes {shape.gpus_per_stage} GPU(s){cp} × {shape.data_parallel} replica(s) = "
                    f"{shape.stage_gpus} GPUs, more than the largest region's {max(counts)}",
                    "a stage whose replicas fit inside one region",
                )
            for model_path, model in models:
                _check_schedules(scenario, model, shape, shape_path)
                _check_model(scenario, model, model_path, shape, shape_path, scale_path, counts, gpus, components, linked)


def _class_label(scenario: Scenario, shape_path: str) -> str:
    """``"job class 'name': "`` for a shape that is a job class's (its key path ``workload.job_classes[i]``), else
    an empty string."""
    match = re.fullmatch(r"workload\.job_classes\[(\d+)\]", shape_path)
    if match is None:
        return ""
    return f"job class {scenario.workload.classes[int(match.group(1))].name!r}: "


def _schedule_path(shape: JobShape, shape_path: str) -> str:
    """The key path that sets a shape's schedules (its own, or the scenario's)."""
    if not shape.pipeline_schedules:
        return "pipeline_schedule"
    return _join(shape_path, "pipeline_schedules" if len(shape.pipeline_schedules) > 1 else "pipeline_schedule")


def _check_schedules(scenario: Scenario, model: ModelSpec, shape: JobShape, shape_path: str) -> None:
    """Every schedule a shape accepts must run its pipeline: with ``pipeline_stages``, that count (the schedule's
    shape rules, and each stage's layers split evenly into its chunks per device); otherwise some stage count."""
    names = scenario.schedules_of(shape)
    v = scenario.virtual_stages_of(shape)
    v_path = "virtual_stages" if shape.virtual_stages is None else _join(shape_path, "virtual_stages")
    m = shape.num_microbatches
    for name in names:
        if v != 1 and not schedules.spec(name).virtual_stages and len(names) == 1:
            raise ScenarioError(v_path, f"{v} chunks per device, but {name} takes none",
                                "virtual_stages only with interleaved-1f1b or hanayo")
        k = shape.pipeline_stages
        if k is None:
            if not runnable_stages((name,), model.layers, m, v, np.arange(1, model.layers + 1)).any():
                raise ScenarioError(
                    _schedule_path(shape, shape_path),
                    f"{name} runs model {model.name!r} ({model.layers} layers) with {m} micro-batches and "
                    f"virtual_stages {v} at no stage count",
                    "a schedule, virtual_stages and batch it can run",
                )
            continue
        try:
            schedules.check_shape(name, k, m, schedules.own_virtual_stages(name, v))
        except schedules.ShapeError as error:
            key, _, problem = str(error).partition(": ")
            where = {"virtual_stages": v_path, "pipeline_stages": _join(shape_path, "pipeline_stages"),
                     "num_microbatches": _join(shape_path, "num_microbatches")}.get(key, _schedule_path(shape, shape_path))
            raise ScenarioError(where, problem, f"a shape {name} can run") from None
        chunks = schedules.chunks_per_device(name, schedules.own_virtual_stages(name, v))
        per_stage = -(-model.layers // k)
        if per_stage % chunks:
            raise ScenarioError(
                v_path if schedules.spec(name).virtual_stages else _schedule_path(shape, shape_path),
                f"model {model.name!r} has {per_stage} layers per stage over {k} stages, which {name}'s {chunks} "
                "chunks per device do not divide",
                "chunks per device that divide each stage's layers",
            )


def _check_model(
    scenario: Scenario,
    model: ModelSpec,
    model_path: str,
    shape: JobShape,
    shape_path: str,
    scale_path: str,
    counts: np.ndarray,
    gpus: tuple[GpuType, ...],
    components: list[np.ndarray],
    linked: np.ndarray,
) -> None:
    """One model of one shape against a fleet, by the sizing rule the generator uses (see ``sizing``)."""
    b, s, m, t, d = shape.micro_batch_size, shape.seq_len, shape.num_microbatches, shape.gpus_per_stage, shape.data_parallel
    memory_gb = np.array([g.memory_gb for g in gpus])
    names = scenario.schedules_of(shape)
    sizing = size_job(
        model.params, model.layers, model.hidden, b, s, m, t, names[0], counts, memory_gb,
        np.array([g.tflops for g in gpus]), linked, d, scenario.virtual_stages_of(shape), shape.context_parallel,
        shape.recompute, names[1:], shape.optimizer_state,
    )
    if sizing is None:
        counts_text = "even at one stage per layer"
        if any(name not in (schedules.ONE_F_ONE_B, schedules.GPIPE) for name in names):
            counts_text = f"at any stage count that {', '.join(names)} can run"
        raise ScenarioError(
            scale_path if scale_path == "randomize.gpu_types" else model_path,
            f"model {model.name!r} ({model.params_b:g}B params) fits no GPU memory{_fleet_text(scale_path, gpus)}, "
            f"{counts_text}, on the largest GPU ({max(memory_gb):g} GB) with b={b}, s={s}, M={m} and "
            f"{t} GPU(s) per stage",
            "a model whose stages fit GPU memory (more gpus_per_stage, a smaller micro_batch_size or seq_len, "
            "or a GPU with more memory)",
        )
    need_stages, ref_memory_gb = sizing.min_stages, memory_gb[sizing.ref_region]
    if shape.pipeline_stages is not None:
        stages_path = _join(shape_path, "pipeline_stages")
        if shape.pipeline_stages > model.layers:
            raise ScenarioError(
                stages_path, f"{shape.pipeline_stages} stages for model {model.name!r} with {model.layers} layers",
                f"at most {model.layers} (one layer per stage)",
            )
        if shape.pipeline_stages < need_stages:
            raise ScenarioError(
                stages_path,
                f"{shape.pipeline_stages} stages of model {model.name!r} do not fit {ref_memory_gb:g} GB GPUs at "
                f"{t} GPU(s) per stage{_fleet_text(scale_path, gpus)}",
                f"at least {need_stages} stages (or more gpus_per_stage)",
            )
        need_stages = shape.pipeline_stages
    need_gpus = need_stages * shape.stage_gpus
    if need_stages > sizing.total_stages:
        cp = f" × {shape.context_parallel} context-parallel" if shape.context_parallel > 1 else ""
        raise ScenarioError(
            scale_path or model_path,
            f"{_class_label(scenario, shape_path)}model {model.name!r} needs at least {need_stages} stages × {t} "
            f"GPU(s){cp} × {d} replica(s) = {need_gpus} GPUs of >= {ref_memory_gb:g} GB, but the scenario's regions "
            f"hold {sizing.total_stages} such stages even all together" + _fleet_text(scale_path, gpus),
            f"at least {need_gpus} such GPUs in total, in whole stages of {shape.stage_gpus} GPUs per region",
        )
    if shape.max_stages is not None and need_stages > shape.max_stages:
        raise ScenarioError(
            _join(shape_path, "max_stages"),
            f"{shape.max_stages} stages are too few for model {model.name!r}, which needs at least {need_stages} "
            f"to fit {ref_memory_gb:g} GB GPUs",
            f"max_stages >= {need_stages}",
        )
    if need_stages > sizing.room_stages:
        ids = scenario.region_ids
        room_gpus = sizing.room_stages * shape.stage_gpus
        if len(components) > 1:
            groups = "; ".join("[" + ", ".join(ids[i] for i in np.flatnonzero(g)) + "]" for g in components)
            raise ScenarioError(
                scale_path or "network.matrix",
                f"the network splits into {len(components)} disconnected groups ({groups}) and model {model.name!r} "
                f"needs {need_gpus} GPUs, more than one pipeline path can reach (at most {room_gpus})",
                "matrix links that join enough regions for every job to fit on one path of linked regions",
            )
        raise ScenarioError(
            scale_path or "network.matrix",
            f"model {model.name!r} needs {need_gpus} GPUs, but one pipeline path (regions linked one after another, "
            f"each once) holds at most {room_gpus}, though the regions hold {sizing.total_stages * shape.stage_gpus} "
            "all together",
            "matrix links that put enough regions on one path for every job (a chain, not only a star)",
        )


__all__ = ["ScenarioError", "builtin_names", "load_builtin", "load_scenario"]
