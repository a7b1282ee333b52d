"""Model errors that say whose fault they are.

`ModelError` (from `arena.protocols`) covers every backend failure. `ModelRequestError` narrows it
to a request the backend cannot serve as given (prompt longer than the context, invalid JSON
schema, a 4xx from the server); retrying it is pointless and a server maps it to HTTP 400.
"""

from __future__ import annotations

from arena.protocols import ModelError


class ModelRequestError(ModelError):
    """The request itself is invalid for this backend; retrying will not help."""


class ModelUnavailable(ModelError):
    """The backend could not be reached or kept failing (retries exhausted, circuit open)."""
