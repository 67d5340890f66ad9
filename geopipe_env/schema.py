"""Layer 4: a JSON Schema (draft 2020-12) of scenario files, for editors that complete and check YAML.

The schema states the keys, types and simple ranges of :mod:`geopipe_env.loader`; the loader stays the authority
(cross-field rules such as "exactly one price per region" or "every job fits the world" are its alone). The key
sets are the loader's own tuples, so a key added there without a type here fails ``tests/test_schema.py``.

``python -m geopipe_env.schema`` prints it; the package ships it as ``geopipe_env/data/scenario.schema.json``.
With the YAML language server, a file opts in with ``# yaml-language-server: $schema=<path to that file>``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from geopipe_env import bundled, loader
from geopipe_env.physics.schedule import SCHEDULES
from geopipe_env.scenario import PIPELINE_SIZINGS

SCHEMA_ID = "https://geopipe.invalid/scenario.schema.json"  # a name, not a location: nothing is fetched


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or ``null`` (an explicit null means "use the default" to the loader), written so that a validator
    still reports the specific rule a wrong value breaks."""
    schema = dict(schema)
    if "type" in schema:
        schema["type"] = [schema["type"], "null"]
    elif "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    elif "const" in schema:
        schema["enum"] = [schema.pop("const"), None]
    else:
        schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
    return schema


def _number(minimum: float | None = None, exclusive: bool = False, maximum: float | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    if minimum is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def _integer(minimum: int | None = 1) -> dict[str, Any]:
    return {"type": "integer"} if minimum is None else {"type": "integer", "minimum": minimum}


def _object(properties: dict[str, Any], keys: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A mapping with exactly the loader's ``keys``; every optional property may also be null."""
    if set(properties) != set(keys):  # the loader's keys and these types must agree
        raise ValueError(f"schema and loader disagree on keys {sorted(set(properties) ^ set(keys))}")
    props = {k: (v if k in required else _nullable(v)) for k, v in properties.items()}
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


POSITIVE = _number(0.0, exclusive=True)
NON_NEGATIVE = _number(0.0)
PROBABILITY = _number(0.0, maximum=1.0)
RANGE = {"type": "array", "prefixItems": [POSITIVE, POSITIVE], "minItems": 2, "maxItems": 2}


def _shape_properties() -> dict[str, Any]:
    return {
        "micro_batch_size": _integer(),
        "seq_len": _integer(),
        "num_microbatches": _integer(),
        "global_batch_size": _integer(),
        "gpus_per_stage": _integer(),
        "data_parallel": _integer(),
        "pipeline_sizing": {"enum": list(PIPELINE_SIZINGS)},
        "pipeline_stages": _integer(),
        "max_stages": _integer(),
        "pipeline_schedule": {"enum": list(SCHEDULES)},
        "pipeline_schedules": {"type": "array", "items": {"enum": list(SCHEDULES)}, "minItems": 1, "uniqueItems": True},
        "virtual_stages": _integer(),
        "context_parallel": _integer(),
        "recompute": {"type": "boolean"},
    }


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (schema v1)."""
    model = {
        "anyOf": [
            {"type": "string", "description": "a catalog key: " + ", ".join(loader.MODEL_CATALOG)},
            _object(
                {"name": {"type": "string"}, "params_b": POSITIVE, "layers": _integer(), "hidden": _integer()},
                loader._MODEL_KEYS,
                required=("params_b", "layers", "hidden"),
            ),
        ]
    }
    dataset = {
        "anyOf": [
            {"type": "string", "description": "a catalog key: " + ", ".join(loader.DATASET_CATALOG)},
            _object({"name": {"type": "string"}, "tokens": POSITIVE}, loader._DATASET_KEYS, required=("name", "tokens")),
        ]
    }
    gpu = {
        "type": "object",
        "properties": {
            "tflops": POSITIVE, "memory_gb": POSITIVE, "busy_watts": POSITIVE, "idle_watts": NON_NEGATIVE,
            "kernel_efficiency": _number(0.0, exclusive=True, maximum=1.0),
        },
        "additionalProperties": False,
    }
    region = _object(
        {
            "id": {"type": "string", "minLength": 1},
            "gpu": {"type": "string", "description": "a GPU type: " + ", ".join(loader.GPU_CATALOG) + ", or one under gpus"},
            "num_gpus": _integer(),
            "access_bandwidth_gbps": POSITIVE,
            "pue": _number(1.0),
            "price_usd_per_kwh": NON_NEGATIVE,
            "price_market": {"enum": list(bundled.price_markets())},
            "price_csv": _object(
                {"path": {"type": "string"}, "column": {"type": "string"}, "unit": {"enum": ["usd_per_mwh", "usd_per_kwh"]}},
                loader._PRICE_CSV_KEYS,
                required=loader._PRICE_CSV_KEYS,
            ),
            "carbon_g_per_kwh": NON_NEGATIVE,
            "carbon_zone": {"enum": list(bundled.carbon_zones())},
        },
        loader._REGION_KEYS,
        required=("id", "gpu", "num_gpus"),
    )
    link = {
        "type": "object",
        "properties": {"bandwidth_gbps": POSITIVE, "latency_ms": NON_NEGATIVE},
        "additionalProperties": False,
    }
    network = _object(
        {
            "rule": {"enum": list(loader.RULES)},
            "matrix": {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": link}},
            "intra_region": {
                "type": "object",
                "properties": {"bandwidth_gbps": POSITIVE, "latency_ms": NON_NEGATIVE},
                "additionalProperties": False,
            },
            "default_latency_ms": NON_NEGATIVE,
            "background": _object(
                {
                    "mean_fraction": _number(0.0, maximum=loader.MAX_BACKGROUND_FRACTION),
                    "amplitude_fraction": NON_NEGATIVE,
                    "period_h": POSITIVE,
                    "phase_h": {"type": "number"},
                },
                loader._BACKGROUND_KEYS,
                required=("mean_fraction",),
            ),
        },
        loader._NETWORK_KEYS,
        required=("rule",),
    )
    job_class = _object(
        {
            "name": {"type": "string"},
            "weight": POSITIVE,
            "models": {"type": "array", "items": model, "minItems": 1},
            "datasets": {"type": "array", "items": dataset, "minItems": 1},
            **_shape_properties(),
        },
        loader._CLASS_KEYS,
    )
    workload = _object(
        {
            "num_jobs": _integer(),
            "arrival": _object(
                {"process": {"enum": list(loader.ARRIVAL_PROCESSES)}, "mean_interarrival_h": POSITIVE},
                ("process", "mean_interarrival_h"),
                required=("process",),
            ),
            "models": {"type": "array", "items": model, "minItems": 1},
            "datasets": {"type": "array", "items": dataset, "minItems": 1},
            "epochs": POSITIVE,
            "trace": _object({"csv": {"type": "string"}}, ("csv",), required=("csv",)),
            "job_classes": {"type": "array", "items": job_class, "minItems": 1},
            **_shape_properties(),
        },
        loader._WORKLOAD_KEYS,
    )
    top = _object(
        {
            "extends": {"type": "string", "description": "a built-in scenario name or a path to a YAML file"},
            "version": {"const": loader.SCHEMA_VERSION},
            "name": {"type": "string"},
            "horizon_h": POSITIVE,
            "start_utc": {"type": "string", "description": 'an ISO 8601 UTC time on a whole hour, or "random"'},
            "mfu": _number(0.0, exclusive=True, maximum=1.0),
            "pipeline_schedule": {"enum": list(SCHEDULES)},
            "virtual_stages": _integer(),
            "bill_idle_capacity": {"type": "boolean"},
            "gpus": {"type": "object", "additionalProperties": gpu},
            "regions": {"type": "array", "items": region, "minItems": 1},
            "network": network,
            "workload": workload,
            "randomize": _object(
                {
                    "bandwidth_scale": RANGE,
                    "gpu_scale": RANGE,
                    "gpu_types": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "GPU types each region draws from: " + ", ".join(loader.GPU_CATALOG) + ", or ones under gpus",
                    },
                    "constant_price_prob": PROBABILITY,
                    "num_jobs": {"type": "array", "prefixItems": [_integer(), _integer()], "minItems": 2, "maxItems": 2},
                    "arrival_scale": RANGE,
                    "batch_arrival_prob": PROBABILITY,
                },
                loader._RANDOMIZE_KEYS,
            ),
            "objective": _object({"cost_weight": NON_NEGATIVE}, ("cost_weight",)),
        },
        loader._TOP_KEYS,
    )
    # A file that extends another may leave out what it inherits; any other file gives the required sections.
    top["if"] = {"not": {"required": ["extends"]}}
    top["then"] = {
        "required": ["horizon_h", "regions", "network", "workload"],
        "properties": {"workload": {"required": ["arrival"]}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "GeoPipe scenario file (schema v1)",
        **top,
    }


if __name__ == "__main__":
    json.dump(scenario_json_schema(), sys.stdout, indent=1)
    sys.stdout.write("\n")
