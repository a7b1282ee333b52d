"""Which τ² domains Arena has ported, and how their port modules are found.

A port module (`arena.public.tau2.<domain>`) gives `COLLECTIONS`, `normalize` and one
`@ported_tool` function per τ² tool (see `docstore`). It is imported by name on first use, so a
domain whose port is missing fails where it is used, with a message that says so, and the rest
of the package (import, scoring) works without it.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from arena.public.tau2.docstore import PortedTool, collect_tools

# Domain -> the module of its port.
PORTS: dict[str, str] = {
    "retail": "arena.public.tau2.retail",
    "airline": "arena.public.tau2.airline",
}


class DomainPortError(LookupError):
    """A domain Arena has no (working) port for."""


def domain_port(name: str) -> ModuleType:
    """The port module of a domain; `DomainPortError` naming the domain when there is none."""
    module_name = PORTS.get(name)
    if module_name is None:
        known = ", ".join(sorted(PORTS))
        raise DomainPortError(f"no Arena port for the τ² domain {name!r} (ported: {known})")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:  # the port exists but something it imports does not
            raise
        raise DomainPortError(
            f"no Arena port for the τ² domain {name!r}: {module_name} is not installed"
        ) from None
    missing = [attr for attr in ("COLLECTIONS", "normalize") if not hasattr(module, attr)]
    if missing:
        raise DomainPortError(f"{module_name} is not a τ² port: it lacks {', '.join(missing)}")
    return module


@functools.cache
def _tools(module_name: str) -> dict[str, PortedTool]:
    return collect_tools(importlib.import_module(module_name))


def domain_tools(name: str) -> dict[str, PortedTool]:
    """The ported tools of a domain, by name (the same dict on every call)."""
    module = domain_port(name)
    return _tools(module.__name__)
