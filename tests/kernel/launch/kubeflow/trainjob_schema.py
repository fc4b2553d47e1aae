"""The TrainJob schema of Kubeflow Trainer v2.3.0 (the release the SDK's API models come from),
as strict as an API server with strict field validation: a field the schema does not name is
an error, not silently dropped."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SCHEMA = Path(__file__).with_name("trainjob-v2.3.0.schema.json")


def strict(node):
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: strict(value) for key, value in node.items()}
    open_ended = "additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and not open_ended:
        node["additionalProperties"] = False
    return node


def trainjob_errors(manifest: dict) -> list[str]:
    """Every way ``manifest`` breaks the TrainJob schema (none: it is valid)."""
    validator = jsonschema.Draft7Validator(strict(json.loads(SCHEMA.read_text())))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(manifest)]
