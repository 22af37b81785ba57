"""The use cases: what an agent tool, a management command or an auditor read does.

Each use case takes what it needs from the composition root (`service.ports.Ports`, built once
in api/bootstrap.py), the caller (`service.caller.Identity`) and plain values; it returns a
domain type or a small dataclass, or raises a domain error (domain/errors.py). The HTTP routes,
the MCP tools and the CLI are doors to them: they parse, call and map, and call no other door.
"""

__all__: list[str] = []
