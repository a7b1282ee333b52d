"""The API that environment `tools.py` files use: `tool`, `Db`, `ToolError`.

Everything else about environments (loading, runtime, sandbox, registry) lives in submodules so
that importing this package from a tools file stays cheap.
"""

from arena.env.db import Db
from arena.env.tool import ToolDef, ToolError, tool

__all__ = ["Db", "ToolDef", "ToolError", "tool"]
