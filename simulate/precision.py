"""Which floating-point type a local model computes in: bfloat16 where the hardware has it natively.

On a CPU with AVX-512 BF16 (or AMX) bfloat16 halves the bytes every decode step reads and
runs the matmuls natively; elsewhere it is emulated and slower than float32, so "auto" keeps
float32 there. GPUs that support bfloat16 always get it.
"""

from __future__ import annotations

from typing import Any, Literal

Dtype = Literal["auto", "float32", "bfloat16"]


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX)."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def native_bf16(device: str) -> bool:
    """Whether `device` ("cpu", "cuda", "cuda:N") computes bfloat16 natively."""
    if device.startswith("cuda"):
        import torch

        return bool(torch.cuda.is_bf16_supported())
    return cpu_has_bf16()


def resolve_dtype(setting: Dtype | str, device: str) -> Any:
    """The torch dtype for `setting` on `device`: "auto" is bfloat16 where native, else float32."""
    import torch

    if setting == "auto":
        return torch.bfloat16 if native_bf16(device) else torch.float32
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if setting not in dtypes:
        raise ValueError(f"unknown dtype {setting!r}: use auto, float32 or bfloat16")
    return dtypes[setting]
