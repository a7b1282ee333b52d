"""The stand-in model server of `arena bench soak --kill-model-every`, run as a process of its own:
`python -m ops.soak_model_server --port P` serves `StandInChatModel`, a scripted fake (no model),
behind the real OpenAI-compatible server (`simulate.serve`) until SIGTERM.

A module of its own so that the soak's process, which only calls it, never imports the server's
dependencies (`simulate.serve` brings in torch: about 190 MiB of resident memory the soak would
count as the daemon's).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import signal
import sys
from typing import Any

import anyio

from arena.types import Completion, Message
from ops.soak_model import MODEL_NAME
from simulate.serve import create_app, serving

PR_SET_PDEATHSIG = 1


class StandInChatModel:
    """A scripted fake chat model: a fixed answer per conversation, after `pause_s`."""

    name = MODEL_NAME

    def __init__(self, pause_s: float = 0.05) -> None:
        self.pause_s = pause_s

    async def chat(self, messages: list[Message], *, tools: Any = None, params: Any = None) -> Completion:
        """The answer: a hash of the last message, so a repeated call answers the same."""
        await anyio.sleep(self.pause_s)
        digest = hashlib.sha256((messages[-1].content or "").encode()).hexdigest()[:8]
        return Completion(text=f"standin {digest}")


def main(argv: list[str] | None = None) -> int:
    """Serve the stand-in model on `--port` until SIGTERM, or until its parent dies."""
    parser = argparse.ArgumentParser(prog="python -m ops.soak_model_server", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True, help="the pid of the process that started it")
    args = parser.parse_args(argv)

    # Dies with the soak that started it, SIGKILLed or not: a daemon killed by the soak's
    # supervisor must not leave its model server behind.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != args.parent:
        return 0  # the parent died before the line above took effect

    async def serve() -> None:
        async with serving(create_app(StandInChatModel()), port=args.port):
            await anyio.sleep_forever()  # until a signal: uvicorn stops on SIGTERM/SIGINT

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
