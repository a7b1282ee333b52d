"""The policy's chat format: one set of chat-template arguments wherever the policy's prompts are rendered.

A chat template takes arguments beside the messages (Qwen3's `enable_thinking`, and whatever a
model's template reads). GRPO's rollouts, the SFT warm-up's targets, EVALUATE, the yardstick and
the publish gate must all render the same conversation to the same tokens: a policy trained on
one format and measured in another is measured on a context it never trained in. Every renderer
goes through `render_chat` with the one setting (`trainer.chat_template_kwargs`, on the trainer's
`TrainerConfig.chat_template_kwargs` and the policy's `ModelSpec`); a vLLM policy server gets the
same arguments in each chat request (`chat_template_kwargs`).

With thinking on the sampled reasoning stays in the token chain as sampled, but it is cut from the
text the episode sees (`visible_text`), so tool calls and answers are read from what follows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from simulate.model_errors import ModelRequestError

# Qwen3 thinks unless told not to; GRPO's token-exact rollouts always rendered it without.
DEFAULT_TEMPLATE_KWARGS: dict[str, Any] = {"enable_thinking": False}

_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


def render_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    template_kwargs: Mapping[str, Any],
    *,
    add_generation_prompt: bool,
) -> str:
    """The template's text for `messages` (OpenAI dicts) and `tools` (OpenAI tool dicts)."""
    try:
        return str(
            tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                tools=[dict(t) for t in tools] if tools else None,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                **template_kwargs,
            )
        )
    except Exception as exc:  # jinja errors: the template rejects this conversation
        raise ModelRequestError(f"the chat template cannot render these messages: {exc}") from exc


def thinking(template_kwargs: Mapping[str, Any]) -> bool:
    """Whether the arguments turn the template's reasoning on."""
    return bool(template_kwargs.get("enable_thinking", False))


def visible_text(text: str, template_kwargs: Mapping[str, Any]) -> str:
    """A completion's text as the episode sees it: the leading reasoning block cut when thinking is on."""
    return _THINK.sub("", text, count=1) if thinking(template_kwargs) else text
