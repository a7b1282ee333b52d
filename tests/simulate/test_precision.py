"""Which dtype a local model computes in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from simulate.precision import cpu_has_bf16, native_bf16, resolve_dtype


def test_explicit_dtypes_are_kept() -> None:
    assert resolve_dtype("float32", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16


def test_auto_is_bfloat16_only_where_the_cpu_computes_it() -> None:
    flags = Path("/proc/cpuinfo").read_text()
    native = "avx512_bf16" in flags or "amx_bf16" in flags
    assert cpu_has_bf16() == native and native_bf16("cpu") == native
    assert resolve_dtype("auto", "cpu") == (torch.bfloat16 if native else torch.float32)


def test_an_unknown_dtype_is_named() -> None:
    with pytest.raises(ValueError, match=r"'float16'.*auto, float32 or bfloat16"):
        resolve_dtype("float16", "cpu")
