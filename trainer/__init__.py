"""GRPO training through TRL, checkpoints and weight publishing.

The phase-level API the daemon calls (documented in docs/contracts.md):
`trainer.grpo.train_round`, `trainer.sft.sft_warmup`, with `trainer.config.TrainerConfig`,
observer records from `trainer.metrics` and publishers from `trainer.publish`.
"""
