"""Task and environment synthesis.

- `graph` / `walk` / `graph_tasks`: tool dependency graphs and graph-based tasks (Agent-World,
  EnvFactory);
- `programmatic`: tasks whose reference is a helper-written program run in the sandbox;
- `filters`: the gates every synthesized task passes (gold, empty, stability, dedup, solvability);
- `targeted`: synthesis steered by a diagnosis `Guideline`;
- `complexify`: growing an environment's database into a new version;
- `envgen`: whole environments from a theme (AWM);
- `cost`: the `SynthesisReport` (model calls, tokens, seconds, acceptance per stage).

The helper model is always a `ChatModel` parameter: this package never imports `simulate`.
"""
