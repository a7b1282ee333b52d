"""Public benchmarks: held-out environments Arena did not write, scored by their own rules.

They are imported from a distribution the user supplies (Arena never downloads or bundles one),
kept under `DATA_DIR/public/<benchmark>`, and never drawn into training or synthesis: the
environment registry does not see them. BFCL multi-turn (`arena.public.bfcl`) is the first.
"""
