"""`arena serve-model` (an OpenAI-compatible server over the local backend) and `arena bench model`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import anyio
import anyio.to_thread
import structlog

from arena.protocols import ModelError
from ops.cli import Cli, CliError

if TYPE_CHECKING:
    from simulate.bench import EngineRun, RolloutRun
    from simulate.local import LocalChatModel


class BenchRunResult(NamedTuple):
    """What `_bench` measured, before the verdicts."""

    name: str
    device: str
    runs: list[EngineRun]
    rollouts: list[RolloutRun]
    llama_cpp: str | None


def _load(args: argparse.Namespace, max_batch: int) -> LocalChatModel:
    from simulate.local import LocalChatModel

    if max_batch < 1:
        raise CliError(f"--max-batch must be at least 1, got {max_batch}")
    try:
        return LocalChatModel.load(
            args.model,
            device=args.device,
            max_batch=max_batch,
            cache_dir=args.cache_dir,
            dtype=args.dtype,
            fast_decode=getattr(args, "fast_decode", True),
        )
    except ModelError as exc:
        raise CliError(f"cannot load model {args.model!r}: {exc}") from None


def _quiet() -> None:
    # JSON goes to stdout; log lines (one per model call) would drown it, so only warnings, on stderr.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """`arena serve-model [--model PATH|embedded] [--host] [--port] [--allow-reload]`."""
    from simulate.serve import create_app, serving

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be between 0 and 65535, got {args.port}")
    from ops.admin import is_loopback

    if args.allow_reload and not is_loopback(args.host):
        # The reload endpoints take no credentials: whoever reaches them swaps the served weights.
        raise CliError(
            f"--allow-reload serves unauthenticated weight swaps: use a loopback --host, not {args.host}"
        )
    model = _load(args, args.max_batch)
    app = create_app(model, name=args.name or model.name, allow_reload=args.allow_reload)
    log = structlog.get_logger(__name__)

    async def main() -> None:
        try:
            async with serving(app, host=args.host, port=args.port) as url:
                log.info("serve_model.listening", url=f"{url}/v1", model=args.name or model.name)
                print(f"serving {args.name or model.name} at {url}/v1", file=sys.stderr, flush=True)
                await anyio.sleep_forever()
        except OSError as exc:
            raise CliError(str(exc)) from None

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return 0
    return 0


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CliError(f"--concurrency wants comma-separated integers, got {text!r}") from None
    if not levels or any(level < 1 or level > 1024 for level in levels):
        raise CliError(f"--concurrency levels must be between 1 and 1024, got {text!r}")
    return levels


def _precisions(args: argparse.Namespace) -> list[str]:
    """`--dtype` alone where given ("auto" named as what it resolves to); else float32 and, where
    the device computes it natively, bfloat16."""
    from simulate.local import resolve_device
    from simulate.precision import native_bf16, resolve_dtype

    device = resolve_device(args.device)
    if args.dtype is not None:
        return [str(resolve_dtype(args.dtype, device)).removeprefix("torch.")]
    return ["float32", "bfloat16"] if native_bf16(device) else ["float32"]


def _gguf(args: argparse.Namespace) -> Path | None:
    if args.gguf is not None:
        return args.gguf
    if args.model != "embedded":
        return None
    from simulate.embedded import EmbeddedModelMissing, gguf_path

    try:
        return gguf_path()
    except EmbeddedModelMissing:
        return None


async def _bench(args: argparse.Namespace, levels: list[int]) -> BenchRunResult:
    from simulate.bench import EngineRun, run_levels
    from simulate.bench_llamacpp import LlamaCppChat, quantization, unavailable_reason
    from simulate.bench_rollouts import bench_rollouts

    runs: list[EngineRun] = []
    rollouts = []
    renderer = None
    name = device = ""
    for precision in _precisions(args):
        for fast in (True, False) if args.transformers else (True,):
            args_for = argparse.Namespace(**{**vars(args), "dtype": precision, "fast_decode": fast})
            model = await anyio.to_thread.run_sync(_load, args_for, max(levels))
            name, device, renderer = model.name, str(model.model.device), model.render_prompt
            measured = await run_levels(model, levels, args.new_tokens, model.batcher)
            runs.append(
                EngineRun(
                    engine="arena",
                    precision=precision,
                    decode="fast" if fast else "transformers",
                    levels=measured,
                )
            )
            if fast and args.rollout_groups:
                rollouts.append(await bench_rollouts(model, precision, groups=args.rollout_groups))
            del model
    gguf = _gguf(args)
    why = "--no-llama-cpp" if args.no_llama_cpp else unavailable_reason(gguf)
    if why is None and gguf is not None and renderer is not None:
        engine = await anyio.to_thread.run_sync(LlamaCppChat, gguf, renderer)
        single = await run_levels(engine, [1], args.new_tokens)
        runs.append(
            EngineRun(engine="llama.cpp", precision=quantization(gguf), decode="llama.cpp", levels=single)
        )
    return BenchRunResult(name=name, device=device, runs=runs, rollouts=rollouts, llama_cpp=why)


def cmd_bench(args: argparse.Namespace) -> int:
    """`arena bench model [--json]`: the local engine beside llama.cpp, and GRPO rollouts an hour."""
    from simulate.bench import verdicts

    levels = _levels(args.concurrency)
    if not 1 <= args.new_tokens <= 4096:
        raise CliError(f"--new-tokens must be between 1 and 4096, got {args.new_tokens}")
    if not 0 <= args.rollout_groups <= 64:
        raise CliError(f"--rollout-groups must be between 0 and 64, got {args.rollout_groups}")
    if args.gguf is not None and not args.gguf.is_file():
        raise CliError(f"--gguf {args.gguf}: no such file")
    _quiet()
    result = anyio.run(_bench, args, levels)
    report = verdicts(
        result.name, result.device, args.new_tokens, result.runs, result.rollouts, result.llama_cpp
    )
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
        return 0
    print(f"model {report.model} on {report.device}, greedy, {report.new_tokens} new tokens per request")
    for run in report.runs:
        print(f"  {run.engine} {run.precision} ({run.decode} decode)")
        for level in run.levels:
            print(
                f"    {level.concurrency:>4} concurrent: {level.tokens_per_s:8.1f} tokens/s, "
                f"{level.ms_per_token:6.1f} ms a token ({level.completion_tokens} tokens in {level.wall_s:.1f}s)"
            )
    for roll in report.rollouts:
        print(
            f"  GRPO rollouts, {roll.precision}: {roll.episodes_per_hour:.0f} episodes/hour "
            f"({roll.groups}x{roll.group_size} episodes of {roll.turns} turns in {roll.wall_s:.1f}s)"
        )
    if report.llama_cpp:
        print(f"  llama.cpp not run: {report.llama_cpp}")
    if report.single_stream_share is not None:
        verdict = "met" if report.single_stream_met else "NOT met"
        print(f"single stream: {report.single_stream_share:.2f} of llama.cpp's (target 0.5: {verdict})")
    if report.concurrent_tokens_per_s is not None:
        verdict = "met" if report.concurrent_met else "NOT met"
        print(f"32 concurrent: {report.concurrent_tokens_per_s:.0f} tokens/s (target 600: {verdict})")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded", help="a model folder, or 'embedded' (default)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    parser.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16"],
        default=None,
        help="weights' dtype (default: float32 on CPU, bfloat16 on GPU; auto: bfloat16 where native)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="model cache (default: $ARENA_DATA_DIR/models)"
    )


def register(cli: Cli) -> None:
    """Add `serve-model` and `bench model`."""
    serve = cli.command("serve-model", "Serve a local model over an OpenAI-compatible HTTP API.")
    _common(serve)
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    serve.add_argument("--name", default=None, help="the served model name (default: the model's)")
    serve.add_argument("--max-batch", type=int, default=32, help="largest decode batch (default 32)")
    serve.add_argument(
        "--allow-reload",
        action="store_true",
        help="serve vLLM's weight-reload endpoints (POST /collective_rpc reload_weights, /reset_prefix_cache, "
        "/v1/load_lora_adapter, /v1/unload_lora_adapter) so a trainer can publish new weights; anyone "
        "who reaches them can swap the weights",
    )
    serve.set_defaults(func=cmd_serve)

    bench = cli.group("bench").add_parser(
        "model",
        help="The local engine's tokens/s at 1, 8 and 32 concurrent requests in each precision, "
        "beside llama.cpp on the same model, and GRPO rollout episodes per hour.",
    )
    _common(bench)
    bench.add_argument(
        "--transformers", action="store_true", help="also decode every token through transformers' forward"
    )
    bench.add_argument(
        "--gguf", type=Path, default=None, help="llama.cpp's model file (default: the embedded GGUF)"
    )
    bench.add_argument("--no-llama-cpp", action="store_true", help="leave llama.cpp out")
    bench.add_argument(
        "--rollout-groups", type=int, default=2, help="GRPO groups of 4 episodes in the rollout run (0: none)"
    )
    bench.add_argument("--concurrency", default="1,8,32", help="comma-separated levels (default 1,8,32)")
    bench.add_argument("--new-tokens", type=int, default=64, help="tokens per request (default 64)")
    bench.add_argument("--json", action="store_true", help="print the report as JSON")
    bench.set_defaults(func=cmd_bench)
