"""Swapping a local model's weights between decode batches: full state dicts, checkpoints, LoRA adapters.

`WeightSwaps` is the part of `simulate.local.LocalChatModel` the trainer and the model server's
reload endpoints use; every swap waits for the running batch (the model lock) and clears the
prefix KV store, whose keys were computed with the old weights.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import structlog

from arena.protocols import ModelError

log = structlog.get_logger(__name__)


class WeightSwaps:
    """Weight swaps of a local chat model (mixed into `LocalChatModel`, which sets these fields)."""

    name: str
    _model: Any
    _model_lock: threading.Lock
    _kv_store: Any  # simulate.kv_reuse.PrefixKVStore | None
    _adapter_base: dict[str, Any]  # the layers a served LoRA adapter changed, as they were before it

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Copy a full set of new weights into the model, between batches (blocking).

        Checked before anything is copied, so a mismatched checkpoint leaves the model untouched.
        """
        expected = set(self._model.state_dict())
        tied = getattr(self._model, "_tied_weights_keys", None) or ()
        missing = sorted(expected - set(state_dict) - set(tied))
        unexpected = sorted(set(state_dict) - expected)
        if missing or unexpected:
            raise ModelError(
                f"weights do not fit the model: {len(missing)} missing (e.g. {missing[:3]}), "
                f"{len(unexpected)} unexpected (e.g. {unexpected[:3]})"
            )
        with self._model_lock:
            if self._kv_store is not None:
                self._kv_store.clear()  # computed with the old weights
            try:
                self._model.load_state_dict(state_dict, strict=False)
            except RuntimeError as exc:  # shape mismatches
                raise ModelError(f"weights do not fit the model: {exc}") from exc
            self._adapter_base = {}  # new full weights: the adapter served before is gone with the old
        log.info("local_model.weights_loaded", model=self.name, tensors=len(state_dict))

    def load_adapter(self, path: str | Path) -> None:
        """Serve the full weights loaded last plus the LoRA adapter in `path`, merged (blocking).

        Replaces the adapter served before: a round's adapters are each relative to the round's
        full weights, not to one another. Checked before anything changes (`ModelError`).
        """
        from simulate.lora_merge import adapter_deltas

        deltas = adapter_deltas(path, self._model.state_dict())
        with self._model_lock:
            params = self._restore_base()
            for name, delta in deltas.items():
                self._adapter_base[name] = params[name].clone()
                params[name].add_(delta)  # state_dict() tensors share the parameters' storage
            if self._kv_store is not None:
                self._kv_store.clear()
        log.info("local_model.adapter_loaded", model=self.name, path=str(path), layers=len(deltas))

    def unload_adapter(self) -> None:
        """Serve the full weights loaded last again, without the adapter (blocking)."""
        with self._model_lock:
            self._restore_base()
            if self._kv_store is not None:
                self._kv_store.clear()

    def _restore_base(self) -> dict[str, Any]:
        """Put back the layers the served adapter changed (the caller holds the model lock)."""
        params = self._model.state_dict()
        for name, weight in self._adapter_base.items():
            params[name].copy_(weight)
        self._adapter_base = {}
        return params

    def weights_changed(self) -> None:
        """Say the model's weights were changed in place (an optimizer step): cached keys are stale."""
        if self._kv_store is not None:
            with self._model_lock:
                self._kv_store.clear()

    def load_weights(self, path: str | Path) -> None:
        """Load safetensors weights from a checkpoint folder (or one `.safetensors` file)."""
        from safetensors.torch import load_file

        path = Path(path)
        files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise ModelError(f"no safetensors weights at {path}")
        state: dict[str, Any] = {}
        for file in files:
            state.update(load_file(str(file), device=str(self._model.device)))
        self.load_state_dict(state)
