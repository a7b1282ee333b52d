"""The converted embedded model is reused only when this transformers version and template wrote it."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulate import embedded


def test_a_folder_converted_by_another_transformers_is_converted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted: list[Path] = []

    def convert(target: Path) -> None:  # stands in for the ~30 s GGUF conversion
        converted.append(target)
        target.mkdir(parents=True, exist_ok=True)
        (target / embedded._MARKER).write_text(
            f"converted from x.gguf\n{embedded.converter_line()}\n{embedded.template_line()}\n"
        )

    monkeypatch.setattr(embedded, "_convert", convert)
    target = tmp_path / embedded.EMBEDDED_MODEL_NAME
    target.mkdir()
    (target / embedded._MARKER).write_text("converted from x.gguf\ntransformers 5.17.0\n")
    assert embedded.ensure_embedded_model(tmp_path) == target and converted == [target]
    assert embedded.ensure_embedded_model(tmp_path) == target and converted == [target]  # now current
    (target / embedded._MARKER).write_text("converted from x.gguf\n")  # before versions were written
    embedded.ensure_embedded_model(tmp_path)
    assert converted == [target, target]


def test_a_folder_written_with_another_chat_template_is_converted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted: list[Path] = []
    monkeypatch.setattr(embedded, "_convert", converted.append)
    target = tmp_path / embedded.EMBEDDED_MODEL_NAME
    target.mkdir()
    (target / embedded._MARKER).write_text(
        f"converted from x.gguf\n{embedded.converter_line()}\n{embedded.template_line()}\n"
    )
    embedded.ensure_embedded_model(tmp_path)
    assert converted == []  # this template: reused
    monkeypatch.setattr(embedded, "tool_chat_template", lambda: "{{ messages }}")
    embedded.ensure_embedded_model(tmp_path)
    assert converted == [target]
