"""Scripted policies for the yardstick tests (fakes, named as such): no model, known outcomes."""

from __future__ import annotations

# The reference-replaying fake lives with `arena bench scale`, which uses it too.
from simulate.scripted_reference import ScriptedReferencePolicy

__all__ = ["ScriptedReferencePolicy"]
