"""Runs a two-step GRPO round for test_resume.py, which SIGKILLs it after its first checkpoint.

Usage: python resume_worker.py MODEL_DIR OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from tiny import letters_task, resume_config

from trainer.grpo import train_round


async def main(model: Path, out: Path) -> None:
    await train_round(0, [letters_task()], model, out, resume_config())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), Path(sys.argv[2]))
