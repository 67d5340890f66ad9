"""Layer 3: a JSON Schema (draft 2020-12) of scenario files, for editors that complete and check YAML.

The schema is generated from the declarations of :mod:`geopipe_env.scenario.format` (each key's type, range,
choices and meaning), so it states exactly the keys the loader reads. The loader stays the authority on the rules
that tie keys together ("exactly one price per region", "every job fits the world").

A file that ``extends`` another may leave out what it inherits: mappings merge key by key, so a section such as
``network`` may be partial there. The keys a complete file needs are therefore required only in a file without
``extends``; the entries of a list (regions, job classes, inline models) replace the base's and are always complete.

``python -m geopipe_env.scenario.schema`` prints it; the package ships it as ``geopipe_env/data/scenario.schema.json``.
With the YAML language server, a file opts in with ``# yaml-language-server: $schema=<path to that file>``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from geopipe_env.scenario.format import SCHEMA_VERSION, SECTIONS, Key

SCHEMA_ID = "https://geopipe.invalid/scenario.schema.json"  # a name, not a location: nothing is fetched
# Sections whose required keys depend on other keys, which the loader checks: a gpus entry overriding a catalog GPU
# may give any subset of fields, and a matrix pair takes bandwidth_gbps only under rule matrix.
CONTEXTUAL = ("gpu", "link")


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


def _number(declared: Key, kind: str = "number") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if declared.minimum is not None:
        schema["exclusiveMinimum" if declared.exclusive else "minimum"] = declared.minimum
    if declared.maximum is not None:
        schema["maximum"] = declared.maximum
    return schema


POSITIVE_NUMBER = {"type": "number", "exclusiveMinimum": 0.0}
COUNT = {"type": "integer", "minimum": 1}


def _value(declared: Key, complete: bool) -> dict[str, Any]:
    """The schema of one key's value; ``complete`` as for :func:`_section`."""
    kind, names = declared.kind, list(declared.choice_names())
    if kind in ("number", "integer"):
        return _number(declared, kind)
    if kind == "boolean":
        return {"type": "boolean"}
    if kind in ("string", "time"):
        return {"type": "string", "minLength": 1}
    if kind == "const":
        return {"const": declared.default}
    if kind == "choice":
        return {"enum": names}
    if kind == "choices":
        return {"type": "array", "items": {"enum": names}, "minItems": 1, "uniqueItems": True}
    if kind == "names":
        return {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
    if kind in ("range", "int_range"):
        item = COUNT if kind == "int_range" else POSITIVE_NUMBER
        return {"type": "array", "prefixItems": [item, item], "minItems": 2, "maxItems": 2}
    if kind == "items":
        item = _section(declared.keys, complete=True)
        if names:
            item = {"anyOf": [{"type": "string", "description": "a catalog key: " + ", ".join(names)}, item]}
        return {"type": "array", "items": item, "minItems": 1}
    if kind == "section":
        return _section(declared.keys, complete)
    entry = _section(declared.keys, complete)
    if kind == "entries":
        return {"type": "object", "additionalProperties": entry}
    return {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": entry}}  # matrix


def _section(section: str, complete: bool) -> dict[str, Any]:
    """A mapping with exactly the section's keys, each described by its meaning; an optional key may also be null.
    ``complete``: its required keys are required here, as in a list's entries, which no file merges (else they are
    required only in a file without ``extends``)."""
    properties = {}
    required = [k.name for k in SECTIONS[section] if k.required] if complete and section not in CONTEXTUAL else []
    for declared in SECTIONS[section]:
        value = _value(declared, complete)
        if declared.name not in required:
            value = _nullable(value)
        properties[declared.name] = {**value, "description": declared.meaning}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _required_in_a_complete_file(section: str) -> dict[str, Any]:
    """The keys a file without ``extends`` must give, down through the mappings that merge."""
    schema: dict[str, Any] = {"required": [k.name for k in SECTIONS[section] if k.required]}
    nested = {k.name: _required_in_a_complete_file(k.keys) for k in SECTIONS[section] if k.kind == "section"}
    nested = {name: sub for name, sub in nested.items() if sub["required"] or sub.get("properties")}
    if nested:
        schema["properties"] = nested
    return schema


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (schema v1)."""
    top = _section("top", complete=False)
    top["if"] = {"not": {"required": ["extends"]}}
    top["then"] = _required_in_a_complete_file("top")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"GeoPipe scenario file (schema v{SCHEMA_VERSION})",
        **top,
    }


if __name__ == "__main__":
    json.dump(scenario_json_schema(), sys.stdout, indent=1)
    sys.stdout.write("\n")
