"""One chat format: a conversation renders to the same tokens in SFT, GRPO and evaluation, local and http.

The policy here is the embedded model under a template that, like Qwen3's, has a thinking switch
(thinking off puts an empty think block in the generation prompt): a renderer that does not get
`trainer.chat_template_kwargs` renders another prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.types import SamplingParams
from simulate.token_chat import TokenChatModel

pytestmark = [pytest.mark.model, pytest.mark.anyio]

GENERATION_PROMPT = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
THINKING_SWITCH = (
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def thinking_model(source: Path, folder: Path) -> Path:
    """`source`'s weights and tokenizer, its chat template with Qwen3's thinking switch."""
    folder.mkdir()
    for item in source.iterdir():
        if item.name != "chat_template.jinja":
            (folder / item.name).symlink_to(item)
    template = (source / "chat_template.jinja").read_text()
    assert GENERATION_PROMPT in template
    (folder / "chat_template.jinja").write_text(template.replace(GENERATION_PROMPT, THINKING_SWITCH))
    return folder


async def test_a_conversation_renders_alike_in_sft_grpo_and_evaluation(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """A task's first prompt, as SFT trains it, GRPO samples it (local and http) and EVALUATE, the
    yardstick and the publish gate run it (the daemon's policy, local and http); then its second
    turn, as SFT trains it and GRPO's token chain samples it."""
    import httpx

    from arena.env.registry import Registry
    from ops.config import load_config
    from ops.models import ModelHub
    from simulate.fidelity import usable_tasks
    from simulate.local import LocalChatModel
    from simulate.serve import create_app, serving
    from simulate.token_chain import token_session
    from trainer.checkpoints import load_policy
    from trainer.config import TrainerConfig
    from trainer.rollout_policy import HttpPolicy, local_policy_factory
    from trainer.sft import IGNORE, reference_messages, render_examples
    from work.tasks import prepare_tasks

    folder = thinking_model(embedded_model_path, tmp_path / "policy")
    library = Registry().load_all()["library"]
    (item,), _ = await prepare_tasks(
        usable_tasks(library, 1, []), {"library": library}, system_prompt="compact", tool_subset=0
    )
    tools = list(item.env.tool_specs)
    messages = await reference_messages(item)
    assert messages is not None and [m.role for m in messages][:4] == ["system", "user", "assistant", "tool"]
    first = messages[:2]
    config = TrainerConfig(rollout_dtype="float32")  # thinking off: the default format
    assert config.chat_template_kwargs == {"enable_thinking": False}
    model, tokenizer = load_policy(folder)

    # SFT: the prompts before the reference's assistant turns, as the warm-up trains them.
    (example,) = render_examples(
        tokenizer,
        item,
        messages,
        history_turns=None,
        max_length=1 << 16,
        template_kwargs=config.chat_template_kwargs,
    )
    starts = [
        i for i, label in enumerate(example.labels) if label != IGNORE and example.labels[i - 1] == IGNORE
    ]
    sft_first, sft_second = example.input_ids[: starts[0]], example.input_ids[: starts[1]]
    assert tokenizer.decode(sft_first).endswith("<think>\n\n</think>\n\n")

    # GRPO: local rollouts (the trainer's model) and http rollouts (token ids rendered here).
    trainer = SimpleNamespace(
        model=model, processing_class=tokenizer, accelerator=SimpleNamespace(unwrap_model=lambda m: m)
    )
    local = local_policy_factory(config)(trainer)
    http_config = config.model_copy(update={"rollout_backend": "http", "rollout_base_url": "http://x/v1"})
    token_chat = HttpPolicy(http_config)(trainer)
    grpo_local = local.render_prompt(first, tools)  # type: ignore[attr-defined]
    grpo_http = token_chat.renderer.prompt(first, tools)  # type: ignore[attr-defined]

    # Evaluation (EVALUATE, the yardstick, the publish gate): the daemon's policy, local and over http.
    hub = ModelHub(load_config(environ={"ARENA_MODELS__POLICY__MODEL": str(folder)}))
    evaluated = await hub.policy()
    assert isinstance(evaluated, LocalChatModel)
    eval_local = evaluated.render_prompt(first, tools)
    served = LocalChatModel.load(
        folder, device="cpu", dtype="float32"
    )  # the server's own default: thinking on
    async with serving(create_app(served, name="policy")) as url:
        environ = {
            "ARENA_MODELS__POLICY__BACKEND": "http",
            "ARENA_MODELS__POLICY__BASE_URL": url + "/v1",
            "ARENA_MODELS__POLICY__MODEL": "policy",
            "ARENA_TRAINER__BASE_MODEL": str(folder),
        }
        remote = await ModelHub(load_config(environ=environ)).policy()
        answer = await remote.chat(first, tools=tools, params=SamplingParams(max_tokens=1))
    eval_http = answer.prompt_token_ids

    assert sft_first == grpo_local == grpo_http == eval_local == eval_http
    # The setting reaches each of them: thinking on renders another prompt.
    on = {"enable_thinking": True}
    (thinking,) = render_examples(
        tokenizer, item, messages, history_turns=None, max_length=1 << 16, template_kwargs=on
    )
    assert thinking.input_ids[: len(sft_first)] != sft_first
    assert local.render_prompt(first, tools, on) != grpo_local  # type: ignore[attr-defined]

    # The second turn: GRPO's token chain (the first turn's sampled ids, then the tool result)
    # is the context SFT trains the second reference turn in.
    target = example.input_ids[starts[0] : example.labels.index(IGNORE, starts[0])]

    def answer_with_the_reference(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["prompt"]
        choice = {"text": "", "token_ids": target, "prompt_token_ids": prompt, "finish_reason": "stop"}
        return httpx.Response(200, json={"choices": [choice], "model": "policy"})

    chain = TokenChatModel(
        "http://x", "policy", tokenizer, transport=httpx.MockTransport(answer_with_the_reference)
    )
    with token_session():
        await chain.chat(first, tools=tools, params=SamplingParams(temperature=1.0))
        second = await chain.chat(messages[:4], tools=tools, params=SamplingParams(temperature=1.0))
    assert second.prompt_token_ids == sft_second


def test_the_setting_is_a_trainer_key_that_reaches_the_trainer_config(tmp_path: Path) -> None:
    from ops.config import load_config
    from ops.phases.runtime import trainer_config

    environ = {"ARENA_TRAINER__CHAT_TEMPLATE_KWARGS": '{"enable_thinking": true, "custom": 1}'}
    config = load_config(environ=environ)
    ctx = SimpleNamespace(config=config, round=1)
    assert trainer_config(ctx.config, ctx.round).chat_template_kwargs == {
        "enable_thinking": True,
        "custom": 1,
    }  # type: ignore[arg-type]
    assert trainer_config(load_config(environ={}), 1).chat_template_kwargs == {  # type: ignore[arg-type]
        "enable_thinking": False
    }
