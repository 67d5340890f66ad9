"""The JSON Schema of scenario files: in sync with the loader, shipped as generated, and every shipped file fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from geopipe_env.scenario.loader import SCENARIO_DIR, StrictYamlLoader, load_scenario
from geopipe_env.scenario.schema import scenario_json_schema

jsonschema = pytest.importorskip("jsonschema")
SHIPPED = SCENARIO_DIR.parent / "scenario.schema.json"
BENCHMARK_SCENARIOS = sorted((Path(__file__).parents[1] / "benchmarks" / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator():
    schema = scenario_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_shipped_schema_is_the_generated_one():
    """geopipe_env/data/scenario.schema.json equals ``python -m geopipe_env.scenario.schema`` (regenerate it after a change)."""
    assert json.loads(SHIPPED.read_text()) == scenario_json_schema()


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.yaml")) + BENCHMARK_SCENARIOS, ids=lambda p: p.stem)
def test_every_shipped_scenario_validates(path, validator):
    """Each bundled scenario file and each of the benchmarks' scenarios, as written (a file with ``extends`` may
    leave out what it inherits), fits the schema and loads."""
    data = yaml.load(path.read_text(), Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader subclass
    errors = sorted(validator.iter_errors(data), key=str)
    assert not errors, [e.message for e in errors]
    assert load_scenario(path).name == path.stem


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d.update(horizon_hours=1), "Additional properties"),
        (lambda d: d["regions"][0].update(num_gpus=0), "less than the minimum"),
        (lambda d: d["network"].update(rule="mesh"), "is not one of"),
        (lambda d: d["workload"].update(data_parallel=-1), "less than the minimum"),
        (lambda d: d["workload"].update(pipeline_sizing="kstra"), "is not one of"),
        (lambda d: d.pop("network"), "'network' is a required property"),
    ],
)
def test_bad_documents_fail(change, words, validator):
    """A few mistakes the loader rejects are rejected by the schema too, so an editor shows them."""
    data = yaml.load((SCENARIO_DIR / "toy.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    change(data)
    messages = " | ".join(e.message for e in validator.iter_errors(data))
    assert words in messages


def test_schema_accepts_what_the_loader_accepts(validator):
    """The loader's own test world (every optional section) fits the schema and loads."""
    from test_loader import base

    data = base()
    assert not list(validator.iter_errors(data))
    load_scenario(data)
