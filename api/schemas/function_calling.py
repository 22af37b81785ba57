"""The agent tools as strict function-calling definitions (`GET /tools?format=openai`).

Strict mode (OpenAI's structured outputs, and the common subset other providers enforce)
accepts only a narrow JSON Schema: every property listed in `required`, an optional one
spelled as nullable, `additionalProperties: false` on every object, and no value constraints.
`strict_parameters` rewrites a tool's input schema into that shape; a constraint it has to
drop (length, range, format, default, examples) is kept as words in the description, and the
tool endpoints still enforce it (422).
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel

from api.schemas.tools import ToolSpec

__all__ = ["FunctionTool", "function_tools", "strict_parameters"]

_KEPT: Final = frozenset(
    {"type", "description", "properties", "required", "additionalProperties", "enum", "const"}
    | {"anyOf", "items", "$defs", "$ref"}
)
"""The keywords strict mode accepts; every other one is dropped (and described)."""


class Function(BaseModel):
    """A function a model may call: its name, what it is for, and its strict parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: Literal[True] = True


class FunctionTool(BaseModel):
    """One entry of a chat-completions `tools` list."""

    type: Literal["function"] = "function"
    function: Function


def function_tools(specs: list[ToolSpec]) -> list[FunctionTool]:
    """The tools as strict function definitions, in the same order."""
    return [
        FunctionTool(
            function=Function(
                name=spec.name,
                description=spec.description,
                parameters=strict_parameters(spec.input_schema),
            )
        )
        for spec in specs
    ]


def strict_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema rewritten for strict mode (see the module docstring); input unchanged."""
    return _strict(schema)


def _strict(node: dict[str, Any], *, described: bool = True) -> dict[str, Any]:
    """`node` in strict shape; `described`: with its dropped constraints in its description
    (an anyOf branch leaves them to its parent, whose description a model reads).
    """
    out: dict[str, Any] = {}
    branches = node.get("anyOf", [])
    notes = "; ".join(n for n in [_notes(node), *(_notes(b) for b in branches)] if n)
    for key, value in node.items():
        if key not in _KEPT:
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _strict(each) for name, each in value.items()}
        elif key == "anyOf":
            out[key] = [_strict(v, described=False) for v in value]
        elif key == "items":
            out[key] = _strict(value)
        elif key != "required":
            out[key] = value
    if notes and described:
        said = out.get("description")
        out["description"] = f"{said} ({notes})" if said else notes
    if out.get("type") == "object" or "properties" in out:
        properties: dict[str, Any] = out.setdefault("properties", {})
        required = set(node.get("required", ()))
        for name in properties:
            if name not in required:
                properties[name] = _nullable(properties[name])
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """The property, also accepting null (an optional field's 'not given' in strict mode)."""
    if _accepts_null(node):
        return node
    kind = node.get("type")
    if isinstance(kind, str) and "enum" not in node and "const" not in node:
        return {**node, "type": [kind, "null"]}
    description = node.get("description")
    inner = {k: v for k, v in node.items() if k != "description"}
    nullable: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if description:
        nullable["description"] = description
    return nullable


def _accepts_null(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(each) for each in node.get("anyOf", ()))


def _notes(node: dict[str, Any]) -> str:
    """The dropped constraints of one node, in words."""
    notes = []
    low, high = node.get("minLength"), node.get("maxLength")
    if low is not None or high is not None:
        notes.append(f"{low or 0} to {high} characters" if high else f"at least {low} characters")
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        notes.append(f"from {low} to {high}")
    elif low is not None or high is not None:
        notes.append(f"at least {low}" if low is not None else f"at most {high}")
    if "format" in node:
        notes.append(f"format: {node['format']}")
    if "pattern" in node:
        notes.append(f"matching {node['pattern']}")
    if node.get("default") is not None:
        notes.append(f"null means {json.dumps(node['default'], ensure_ascii=False)}")
    if node.get("examples"):
        shown = ", ".join(json.dumps(e, ensure_ascii=False) for e in node["examples"])
        notes.append(f"e.g. {shown}")
    return "; ".join(notes)
