"""Model backends (local transformers, OpenAI-compatible HTTP) and TRUSTEE-style simulators."""
