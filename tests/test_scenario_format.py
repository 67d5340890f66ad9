"""The scenario format is declared once (geopipe_env.scenario.format): the loader, the JSON Schema and the key table
of docs/scenarios.md each agree with every declaration."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
from test_loader import base

from geopipe_env.scenario.loader import ScenarioError, load_scenario
from geopipe_env.scenario.types import JobShape
from geopipe_env.scenario.format import REQUIRED, SECTIONS, SHAPE_KEYS, Key, key, key_table, keys, trace_columns
from geopipe_env.scenario.schema import scenario_json_schema

ROOT = Path(__file__).resolve().parents[1]


def world() -> dict:
    """A valid scenario with every section that needs no extra file: a new GPU, inline models and datasets, job
    classes, intra-region and background traffic, randomize and objective."""
    data = base()
    data["gpus"] = {"X1": {"tflops": 300.0, "memory_gb": 80.0, "busy_watts": 500.0, "idle_watts": 80.0}}
    data["network"]["intra_region"] = {"latency_ms": 0.05}
    data["network"]["background"] = {"mean_fraction": 0.1}
    data["network"]["degradation"] = {"per_link_day": 0.1, "factor": 0.5, "duration_h": 1.0}
    workload = data["workload"]
    workload["models"].append({"name": "inline-7b", "params_b": 7.0, "layers": 32, "hidden": 4096})
    workload["datasets"].append({"name": "inline-corpus", "tokens": 1.0e8})
    workload["job_classes"] = [{"name": "c0", "weight": 2.0}, {"name": "c1"}]
    data["randomize"] = {"bandwidth_scale": [0.5, 1.0]}
    data["objective"] = {"cost_weight": 1.0}
    data["failures"] = {"per_gpu_day": 1e-3, "repair_h": 24.0}
    data["capacity_loss"] = {"per_region_day": 0.1, "fraction": 0.25, "duration_h": 6.0}
    return data


# Where each section stands in world() (sections that need a file beside the scenario are left out).
AT = {
    "top": (),
    "gpu": ("gpus", "X1"),
    "region": ("regions", 0),
    "network": ("network",),
    "link": ("network", "matrix", "a", "b"),
    "intra_region": ("network", "intra_region"),
    "background": ("network", "background"),
    "degradation": ("network", "degradation"),
    "workload": ("workload",),
    "arrival": ("workload", "arrival"),
    "job_class": ("workload", "job_classes", 0),
    "model": ("workload", "models", 1),
    "dataset": ("workload", "datasets", 1),
    "randomize": ("randomize",),
    "objective": ("objective",),
    "failures": ("failures",),
    "capacity_loss": ("capacity_loss",),
}
# Keys whose check runs only in another context: a latency default exists only under endpoint_mean, and the
# schema version and extends are read before the sections.
ELSEWHERE = {("network", "default_latency_ms"), ("top", "version"), ("top", "extends")}


def _path(section: str, name: str) -> str:
    text = ""
    for part in (*AT[section], name):
        text = f"{text}[{part}]" if isinstance(part, int) else (f"{text}.{part}" if text else part)
    return text


def _mapping(data: dict, section: str) -> dict:
    for part in AT[section]:
        data = data[part]
    return data


def _error(data: dict) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    return info.value


def _declared(*kinds: str) -> list[tuple[str, Key]]:
    return [(s, k) for s in AT for k in SECTIONS[s] if k.kind in kinds and (s, k.name) not in ELSEWHERE]


def test_the_test_world_loads_and_every_section_is_covered():
    load_scenario(world())
    assert set(SECTIONS) - set(AT) == {"price_csv", "trace"}  # their keys name files (tests/test_loader.py)


@pytest.mark.parametrize("section", AT)
def test_the_loader_allows_exactly_the_declared_keys(section):
    """A key not declared in a section is refused at its path, with the declared keys as what was expected."""
    data = world()
    _mapping(data, section)["zz_undeclared"] = 1
    error = _error(data)
    assert error.key_path == _path(section, "zz_undeclared")
    assert str(error).endswith("expected one of " + ", ".join(keys(section)))


@pytest.mark.parametrize("section, declared", _declared("number", "integer"), ids=lambda v: getattr(v, "name", v))
def test_the_loader_checks_each_number_against_its_declared_range(section, declared):
    """A number just outside its declared range (or of the wrong type) is refused at its path, and the message
    states the declared range."""
    bad = ["a string"]
    if declared.minimum is not None:
        bad.append(declared.minimum if declared.exclusive else declared.minimum - 1)
    if declared.maximum is not None:
        bad.append(declared.maximum + 1)
    if declared.kind == "integer":
        bad.append(2.5)
    for value in bad:
        data = world()
        _mapping(data, section)[declared.name] = value
        error = _error(data)
        assert error.key_path == _path(section, declared.name), value
        assert declared.range_text() in str(error), (value, str(error))


@pytest.mark.parametrize("section, declared", _declared("choice", "boolean", "string"), ids=lambda v: getattr(v, "name", v))
def test_the_loader_checks_each_name_against_its_declared_choices(section, declared):
    """A value outside a key's declared choices (or of the wrong type) is refused at its path."""
    for value in (["a", "list"], "zz-not-a-choice" if declared.kind == "choice" else None):
        if value is None:
            continue
        data = world()
        _mapping(data, section)[declared.name] = value
        error = _error(data)
        assert error.key_path.startswith(_path(section, declared.name)), value


@pytest.mark.parametrize(
    "section, declared", [(s, k) for s in AT for k in SECTIONS[s] if k.required], ids=lambda v: getattr(v, "name", v)
)
def test_the_loader_requires_each_declared_required_key(section, declared):
    data = world()
    _mapping(data, section).pop(declared.name, None)
    error = _error(data)
    assert error.key_path == _path(section, declared.name) and "missing" in str(error)


def test_declared_defaults_are_the_loaded_values():
    """Each optional key left out loads as its declared default (the shape keys as JobShape's defaults)."""
    scenario = load_scenario(world())
    region = scenario.regions[0]
    workload = scenario.workload
    loaded = {
        ("top", "pipeline_schedule"): scenario.pipeline_schedule,
        ("top", "virtual_stages"): scenario.virtual_stages,
        ("top", "bill_idle_capacity"): scenario.bill_idle_capacity,
        ("region", "pue"): region.pue,
        ("region", "access_bandwidth_gbps"): region.access_bandwidth_gbps,
        ("intra_region", "bandwidth_gbps"): scenario.network.intra_bandwidth_gbps,
        ("intra_region", "latency_ms"): scenario.network.intra_latency_s * 1000.0,
        ("background", "amplitude_fraction"): scenario.network.background.amplitude_fraction,
        ("background", "period_h"): scenario.network.background.period_h,
        ("background", "phase_h"): scenario.network.background.phase_h,
        ("workload", "epochs"): workload.epochs,
        ("job_class", "weight"): workload.classes[1].weight,
        ("objective", "cost_weight"): scenario.cost_weight,
        ("failures", "checkpoint_gbps"): scenario.failures.checkpoint_gbps,
        ("failures", "restart_s"): scenario.failures.restart_s,
        ("capacity_loss", "notice_s"): scenario.capacity_loss.notice_s,
    }
    for (section, name), value in loaded.items():
        assert value == pytest.approx(key(section, name).default), (section, name)
    fields = {f.name: f.default for f in dataclasses.fields(JobShape)} | {"pipeline_sizing": JobShape().sizing}
    for declared in SHAPE_KEYS:
        if declared.default is not None:
            assert fields[declared.name] == declared.default, declared.name
    endpoint = copy.deepcopy(world())
    endpoint["network"] = {"rule": "endpoint_mean"}
    for region_data in endpoint["regions"]:
        region_data["access_bandwidth_gbps"] = 25.0
    latency_s = load_scenario(endpoint).network.latency_s
    assert latency_s[0, 1] * 1000.0 == pytest.approx(key("network", "default_latency_ms").default)


def _schema_section(schema: dict, section: str) -> dict:
    """The schema node of a section in world(), found by the section's place in the file."""
    node = schema
    for part in AT[section]:
        if isinstance(part, str) and part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            node = node["items"] if isinstance(part, int) else node["additionalProperties"]
        node = next((option for option in node.get("anyOf", ()) if "properties" in option), node)
    return node


def test_the_schema_states_each_declared_key_with_its_range_and_choices():
    """Every section of the schema has exactly the declared keys; numbers carry their declared bounds and names
    their declared choices."""
    schema = scenario_json_schema()
    for section in AT:
        properties = _schema_section(schema, section)["properties"]
        assert tuple(properties) == keys(section), section
        for declared in SECTIONS[section]:
            prop = properties[declared.name]
            if declared.kind in ("number", "integer"):
                bound = "exclusiveMinimum" if declared.exclusive else "minimum"
                assert prop.get(bound) == declared.minimum and prop.get("maximum") == declared.maximum, declared.name
            if declared.kind == "choice":
                assert [v for v in prop["enum"] if v is not None] == list(declared.choice_names()), declared.name
            assert prop["description"] == declared.meaning


def test_the_docs_key_table_is_the_declared_one():
    """docs/scenarios.md holds the table key_table() writes (python -m geopipe_env.scenario.format prints it), and
    names every trace column."""
    page = (ROOT / "docs" / "scenarios.md").read_text()
    assert key_table() in page
    trace = page[page.index("**Trace files.**"):]
    trace = trace[: trace.index("\n\n")]
    assert all(f"`{column}`" in trace for column in trace_columns())


def test_every_key_is_declared_once_per_section():
    for section, declared in SECTIONS.items():
        assert len(set(keys(section))) == len(declared), section
        for k in declared:
            assert k.default is REQUIRED or k.kind not in ("section", "items") or k.keys in SECTIONS, (section, k.name)
