"""The declarative parts of an environment folder: `env.toml` and `tests.toml`.

Both files are parsed with `tomllib` and validated with pydantic; every fault becomes a `Problem`
naming the file, the field and (when it can be found) the line.
"""

from __future__ import annotations

import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arena.env.errors import Problems, line_of_key

ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

Kind = Literal["executable", "simulated"]
Origin = Literal["bundled", "user", "synthesized"]


class EnvToml(BaseModel):
    """`env.toml`: what the environment is, for the agent (description, rules) and for the arena."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Identifier: lower-case letters, digits and underscores.")
    title: str = Field(min_length=1)
    category: list[str] = Field(min_length=1, description='Top-level category first: ["Lifestyle", ...]')
    description: str = Field(min_length=1)
    rules: str = ""
    kind: Kind
    now: str = Field(description="The fixed current time of every episode (ISO 8601).")
    origin: Literal["user", "synthesized"] | None = None
    user_id: int | str = 1
    # Where a simulated environment's tool list came from (an MCP server, a catalogue); informative.
    source: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ENV_NAME_RE.fullmatch(value):
            raise ValueError("must be lower-case letters, digits and underscores, starting with a letter")
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: list[str]) -> list[str]:
        if any(not c.strip() for c in value):
            raise ValueError("category entries must be non-empty strings")
        return value

    @field_validator("now")
    @classmethod
    def _now(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time, e.g. 2025-06-01T09:00:00") from None
        return value


class ExpectSql(BaseModel):
    """A query on the state after the call, and the rows it must return (in order)."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1)
    rows: list[list[Any]]


class TestCase(BaseModel):
    """One `[[case]]` of `tests.toml`: call `tool` with `args` on a fresh instance and check."""

    __test__ = False  # not a pytest class, despite the name
    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None
    # Subset of the result: dict keys recursively, lists element-wise, scalars equal.
    expect: Any = None
    # True: the call must fail cleanly; a string: ... and the error must contain it.
    expect_error: bool | str = False
    expect_sql: ExpectSql | list[ExpectSql] | None = None
    # The line of this case's `[[case]]` header, filled by the loader for messages.
    line: int | None = Field(default=None, exclude=True)

    def sql_checks(self) -> list[ExpectSql]:
        """`expect_sql` as a list."""
        if self.expect_sql is None:
            return []
        return self.expect_sql if isinstance(self.expect_sql, list) else [self.expect_sql]

    def label(self, index: int) -> str:
        """How messages refer to this case."""
        return self.name or f"case {index + 1} ({self.tool})"


def read_toml(path: Path, problems: Problems) -> tuple[dict[str, Any], str] | None:
    """Parse a TOML file; on failure record the problem (with tomllib's line) and return None."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add(path, "missing file")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(path, f"cannot read: {exc}")
        return None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        match = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(match.group(1)) if match else None
        reason = re.sub(r"\s*\(at line.*\)$", "", msg)
        problems.add(path, f"invalid TOML: {reason}", line=line)
        return None


def pydantic_problems(
    exc: ValidationError,
    path: Path,
    problems: Problems,
    *,
    text: str = "",
    prefix: str = "",
    base_line: int | None = None,
) -> None:
    """One problem per pydantic error, with the dotted field and the line where it is set."""
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        field = ".".join(loc)
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "missing":
            message = "required field is missing"
        else:
            message = err["msg"].removeprefix("Value error, ")
        line = line_of_key(text, loc[0]) if loc and text else None
        problems.add(
            path, message, line=line or base_line, field=f"{prefix}{field}" if field else prefix or None
        )


def parse_env_toml(path: Path, problems: Problems) -> EnvToml | None:
    """Read and validate `env.toml`; None (with problems recorded) when it is unusable."""
    parsed = read_toml(path, problems)
    if parsed is None:
        return None
    data, text = parsed
    try:
        return EnvToml.model_validate(data)
    except ValidationError as exc:
        pydantic_problems(exc, path, problems, text=text)
        return None


def case_header_lines(text: str) -> list[int]:
    """Line numbers of the `[[case]]` headers, in order (the n-th case starts at the n-th)."""
    return [
        n for n, line in enumerate(text.splitlines(), start=1) if re.match(r"^\s*\[\[\s*case\s*\]\]", line)
    ]


def parse_tests_toml(path: Path, problems: Problems) -> list[TestCase] | None:
    """Read and validate `tests.toml`; every bad case is reported, good ones are returned."""
    parsed = read_toml(path, problems)
    if parsed is None:
        return None
    data, text = parsed
    unknown = sorted(set(data) - {"case"})
    for key in unknown:
        problems.add(path, "unknown top-level key (expected only [[case]] tables)", field=key)
    raw_cases = data.get("case", [])
    if not isinstance(raw_cases, list):
        problems.add(path, "`case` must be an array of tables: write [[case]]", field="case")
        return None
    headers = case_header_lines(text)
    cases: list[TestCase] = []
    for i, raw in enumerate(raw_cases):
        line = headers[i] if i < len(headers) else None
        try:
            case = TestCase.model_validate(raw)
        except ValidationError as exc:
            pydantic_problems(exc, path, problems, prefix=f"case[{i}].", base_line=line)
            continue
        case.line = line
        if case.expect_error and case.expect is not None:
            # A failed call returns no result to compare (expect_sql still checks the state after it).
            problems.add(path, "expect_error cannot be combined with expect", line=line, field=f"case[{i}]")
            continue
        cases.append(case)
    if not raw_cases:
        problems.add(path, "no test cases: add at least one [[case]]")
    return cases
