"""The configuration and metrics references, generated from the settings models and the registry.

`docs/configuration.md` lists every key of `ArenaConfig` (default, environment variable, meaning:
the field's own description) and `docs/metrics.md` every metric `ops.metrics.Metrics` registers
(type, labels, help text). `python -m ops.reference_docs` writes both; `--check` exits 1 when a
file differs from what the code says (`tests/ops/test_reference_docs.py` runs it), so a setting or
metric added without its documentation fails the suite instead of drifting.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ops.config import ENV_PREFIX, FIXED_ENV, ArenaConfig
from ops.config_trainer import NOT_SETTINGS
from ops.metrics import Metrics

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIGURATION = DOCS / "configuration.md"
METRICS = DOCS / "metrics.md"

CONFIGURATION_HEAD = """\
# Configuration reference

<!-- Generated from the settings models by `python -m ops.reference_docs`; do not edit by hand. -->

One TOML file (`arena run --config FILE`, or `ARENA_CONFIG`); examples in `config/`:
`cpu-demo.toml` (embedded model on CPU, used by `make run`), `gpu-8b.toml` (one GPU node with
vLLM), `gpu-learn.toml` (`arena bench learn` on one GPU with the embedded model), `cluster.toml`
(Kubernetes, PostgreSQL). Precedence: defaults < file < environment. Every key can be set as
`ARENA_<SECTION>__<KEY>` (nested with `__`, e.g. `ARENA_MODELS__POLICY__BACKEND=http`); lists may
be given as JSON. A few names are fixed because manifests rely on them: {fixed}. A bad value stops
start-up with one line naming the key, where it came from and why (e.g.
`models.policy.concurrency: Input should be greater than or equal to 1 (from
ARENA_MODELS__POLICY__CONCURRENCY)`); unknown keys are errors, not silently ignored.
`arena config show` prints the effective configuration as a TOML file that `arena run --config`
accepts as it is: derived values such as the store's effective URL are comments, and secrets are
left out with a comment naming the variable that sets them (`--json`: the same with secrets as
asterisks). `arena config check` loads a file with the checks `arena run` makes before it starts.
"""

METRICS_HEAD = """\
# Metrics reference

<!-- Generated from the metrics registry by `python -m ops.reference_docs`; do not edit by hand. -->

`GET /metrics` on the admin address. Every name starts with `arena_`, uses base units, and labels
are bounded: `environment`/`category` values come from the environment registry (anything else is
reported as `other`), never task or episode ids. Histograms also export `_bucket`, `_sum` and
`_count`; the standard `process_*` and `python_info` series are on the same registry.
`deploy/grafana/arena-dashboard.json` charts every metric; `deploy/prometheus/arena-alerts.yml`
alerts on a stuck round, a pause over an hour, a yardstick drop (`ArenaYardstickDrop`: the live
policy below a recent round's 95% interval; the fresh-task pass rate falls after every difficulty
raise by design, so it is not alerted on), a model backend down, a failing phase, a daemon not
scraped and, in cluster mode, no ready episode worker or a policy replica down for 10 minutes.
"""


def settings(model: type[BaseModel] = ArenaConfig, prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """(dotted key, field) for every leaf setting, in the models' order."""
    for name, field in model.model_fields.items():
        if f"{prefix}{name}" in NOT_SETTINGS:
            continue  # derived by the daemon from other sections, refused in a file
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from settings(kind, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


def environment_variable(key: str) -> str:
    """The variable that sets `key`: its fixed name, else `ARENA_<SECTION>__<KEY>`."""
    fixed = {dotted: name for name, dotted in FIXED_ENV.items()}
    return fixed.get(key, ENV_PREFIX + key.upper().replace(".", "__"))


def default_text(field: FieldInfo) -> str:
    """A field's default as the table shows it (— for none)."""
    value: Any = field.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return "—"
    if isinstance(value, bool):
        return f"`{value}`"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return f"`{json.dumps(value, default=str)}`"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def configuration_markdown() -> str:
    """docs/configuration.md: one table per section."""
    sections: dict[str, list[str]] = {}
    for key, field in settings():
        sections.setdefault(key.split(".", 1)[0], []).append(
            f"| `{key}` | {default_text(field)} | `{environment_variable(key)}` | {_cell(field.description)} |"
        )
    lines = [CONFIGURATION_HEAD.format(fixed=", ".join(f"`{name}`" for name in FIXED_ENV))]
    for name, rows in sections.items():
        lines += [
            f"## `[{name}]`",
            "",
            "| key | default | environment variable | meaning |",
            "|---|---|---|---|",
        ]
        lines += [*rows, ""]
    return "\n".join(lines).rstrip() + "\n"


def metrics_markdown() -> str:
    """docs/metrics.md: every Arena metric on the registry, in the order it is registered."""
    from prometheus_client.metrics import MetricWrapperBase

    lines = [METRICS_HEAD, "| metric | type | labels | meaning |", "|---|---|---|---|"]
    seen: set[str] = set()
    for value in vars(Metrics()).values():
        if not isinstance(value, MetricWrapperBase) or value._name in seen:
            continue
        seen.add(value._name)
        name = value._name + ("_total" if value._type == "counter" else "")
        labels = ", ".join(value._labelnames) or "—"
        lines.append(f"| `{name}` | {value._type} | {labels} | {_cell(value._documentation)} |")
    return "\n".join(lines) + "\n"


def generated() -> dict[Path, str]:
    """Each reference file and what it should hold."""
    return {CONFIGURATION: configuration_markdown(), METRICS: metrics_markdown()}


def main(argv: Sequence[str] | None = None) -> int:
    """Write the references; with `--check`, say which differ and exit 1 instead."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = [path for path, text in generated().items() if not path.exists() or path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path} is out of date: run `python -m ops.reference_docs`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
