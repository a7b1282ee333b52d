"""Prometheus metrics of the daemon: one registry, every metric prefixed `arena_`, base units.

All metrics are defined here so that every part (phases, backends, trainer, sandbox) can be wired
to them and the Grafana dashboard can rely on them. Labels are bounded: `environment` and
`category` values come from the environment registry (`Metrics.env()` folds anything unknown into
"other"), `phase` from the six phases, `role` from policy/helper; never task or episode ids.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

OTHER = "other"
# Model roles recorded by `simulate.calls` (anything else is folded into "other").
ROLES = ("policy", "helper", "judge", "user", "tool", "taskgen", "diagnosis")
REWARD_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
PHASE_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 43200)
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Every metric the daemon exports, on a private registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        # The standard process_* (CPU, memory, open files) and python_info series, on this registry.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._envs: set[str] = set()
        self._categories: set[str] = set()
        # --- rounds and phases
        self.info = Gauge("arena_info", "Build information (always 1).", ["version"], registry=r)
        self.rounds = Counter("arena_rounds_total", "Rounds completed.", registry=r)
        self.round = Gauge("arena_round", "Number of the current round.", registry=r)
        self.round_started = Gauge(
            "arena_round_started_timestamp_seconds", "Unix time the current round started.", registry=r
        )
        self.last_round_completed = Gauge(
            "arena_last_round_completed_timestamp_seconds", "Unix time the last round completed.", registry=r
        )
        self.phase_duration = Histogram(
            "arena_phase_duration_seconds",
            "Wall time of completed phases.",
            ["phase"],
            buckets=PHASE_BUCKETS,
            registry=r,
        )
        self.current_phase = Gauge(
            "arena_current_phase", "1 for the phase running now, 0 for the others.", ["phase"], registry=r
        )
        self.phase_started = Gauge(
            "arena_phase_started_timestamp_seconds", "Unix time the current phase started.", registry=r
        )
        self.phase_progress = Gauge(
            "arena_phase_progress_ratio", "Share of the current phase's work items done.", registry=r
        )
        self.phase_failures = Counter(
            "arena_phase_failures_total", "Phase attempts that raised an error.", ["phase"], registry=r
        )
        self.paused = Gauge("arena_paused", "1 while rounds are paused.", registry=r)
        self.ready = Gauge("arena_ready", "1 when the daemon can do work (store and models up).", registry=r)
        # --- episodes and results
        self.episodes = Counter(
            "arena_episodes_total",
            "Episodes run, by environment and finish.",
            ["environment", "finish"],
            registry=r,
        )
        self.env_pass_rate = Gauge(
            "arena_pass_rate", "Evaluation pass rate in the last round.", ["environment"], registry=r
        )
        self.category_pass_rate = Gauge(
            "arena_category_pass_rate",
            "Evaluation pass rate per top-level category.",
            ["category"],
            registry=r,
        )
        self.overall_pass_rate = Gauge(
            "arena_overall_pass_rate", "Evaluation pass rate over all arena environments.", registry=r
        )
        # How far the helper's judge (the reward of simulated environments) agrees with the
        # programmatic verifier, as last measured by `arena bench sim --save` (-1: unmeasured).
        self.helper_judge_agreement = Gauge(
            "arena_helper_judge_agreement",
            "Measured agreement of the helper's judge with the verifier (-1: not measured).",
            registry=r,
        )
        self.helper_judge_false_pass = Gauge(
            "arena_helper_judge_false_pass",
            "Measured false-pass rate of the helper's judge (-1: not measured).",
            registry=r,
        )
        # The yardstick: fixed tasks at fixed levels, every tool, greedy (`ops.phases.yardstick`).
        self.yardstick_pass_rate = Gauge(
            "arena_yardstick_pass_rate",
            "Yardstick pass rate of the live policy in the last round, by environment and level (all: pooled).",
            ["environment", "level"],
            registry=r,
        )
        self.yardstick_overall = Gauge(
            "arena_yardstick_overall_pass_rate",
            "Yardstick pass rate over every arena environment.",
            registry=r,
        )
        self.yardstick_overall_low = Gauge(
            "arena_yardstick_overall_pass_rate_low",
            "Lower bound of the overall yardstick pass rate's Wilson 95% interval.",
            registry=r,
        )
        self.yardstick_overall_high = Gauge(
            "arena_yardstick_overall_pass_rate_high",
            "Upper bound of the overall yardstick pass rate's Wilson 95% interval.",
            registry=r,
        )
        self.yardstick_change = Gauge(
            "arena_yardstick_change",
            "The live policy's yardstick change, paired over the same tasks, since the first measured round "
            "or the previous one (bound: value, low and high of its bootstrap 95% interval).",
            ["since", "bound"],
            registry=r,
        )
        # The public yardstick: held-out benchmarks scored by their own rules (`ops.phases.public_yardstick`).
        public_labels = ["benchmark", "category"]
        self.public_accuracy = Gauge(
            "arena_public_accuracy",
            "Public-yardstick accuracy of the live policy in the last round, by benchmark and category (all: pooled).",
            public_labels,
            registry=r,
        )
        self.public_accuracy_low = Gauge(
            "arena_public_accuracy_low",
            "Lower bound of the public accuracy's Wilson 95% interval.",
            public_labels,
            registry=r,
        )
        self.public_accuracy_high = Gauge(
            "arena_public_accuracy_high",
            "Upper bound of the public accuracy's Wilson 95% interval.",
            public_labels,
            registry=r,
        )
        self.publish_decisions = Counter(
            "arena_publish_decisions_total",
            "Trained policies published or held back by the yardstick gate.",
            ["decision"],
            registry=r,
        )
        self.eval_tool_subset = Gauge(
            "arena_eval_tool_subset",
            "Distractor tools the fresh evaluation shows beside each task's reference tools "
            "(trainer.tool_subset); -1 when it shows every tool.",
            registry=r,
        )
        self.reward = Histogram(
            "arena_episode_reward", "Episode rewards.", ["environment"], buckets=REWARD_BUCKETS, registry=r
        )
        self.reward_mean = Gauge(
            "arena_reward_mean", "Mean reward of the last phase's episodes.", ["phase"], registry=r
        )
        self.reward_std = Gauge(
            "arena_reward_stddev",
            "Reward standard deviation of the last phase's episodes.",
            ["phase"],
            registry=r,
        )
        # --- training
        self.grpo_loss = Gauge("arena_grpo_loss", "GRPO loss of the last optimizer step.", registry=r)
        self.grpo_kl = Gauge("arena_grpo_kl", "KL divergence to the reference policy, last step.", registry=r)
        self.grpo_entropy = Gauge("arena_grpo_entropy", "Policy token entropy, last step.", registry=r)
        self.grpo_steps = Counter("arena_grpo_steps_total", "Optimizer steps taken.", registry=r)
        self.grpo_zero_variance = Counter(
            "arena_grpo_zero_variance_groups_total",
            "GRPO groups dropped for zero reward variance.",
            registry=r,
        )
        self.grpo_resampled = Counter(
            "arena_grpo_resampled_groups_total",
            "GRPO groups without reward variance replaced by another task's group (dynamic sampling).",
            registry=r,
        )
        self.tokens = Counter("arena_tokens_total", "Tokens generated, by model role.", ["role"], registry=r)
        self.tokens_per_second = Gauge(
            "arena_tokens_per_second", "Generation throughput, by model role.", ["role"], registry=r
        )
        self.checkpoints = Counter("arena_checkpoints_total", "Checkpoints published.", registry=r)
        # --- models
        self.model_latency = Histogram(
            "arena_model_call_duration_seconds",
            "Latency of model calls.",
            ["role", "backend"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.model_errors = Counter(
            "arena_model_errors_total", "Model calls that failed.", ["role", "backend"], registry=r
        )
        self.backend_up = Gauge(
            "arena_model_backend_up",
            "1 when the model backend answers its probe.",
            ["role", "backend"],
            registry=r,
        )
        # One series per configured replica (the label values come from the configuration, so bounded).
        self.replica_up = Gauge(
            "arena_model_replica_up",
            "1 when the model replica answers its probe and is in its pool (not ejected).",
            ["role", "replica"],
            registry=r,
        )
        # --- synthesis, curriculum, diagnosis, sandbox
        self.synthesis_gate = Counter(
            "arena_synthesis_gate_total",
            "Synthesized tasks through each gate, by result.",
            ["gate", "result"],
            registry=r,
        )
        self.tasks_synthesized = Counter(
            "arena_tasks_synthesized_total",
            "Tasks accepted into the pool, by origin.",
            ["origin"],
            registry=r,
        )
        self.difficulty = Gauge(
            "arena_curriculum_difficulty",
            "Curriculum difficulty score per environment (weighted knob levels).",
            ["environment"],
            registry=r,
        )
        self.task_budget = Gauge(
            "arena_curriculum_task_budget",
            "Training tasks planned per environment.",
            ["environment"],
            registry=r,
        )
        self.weak_envs = Gauge("arena_weak_environments", "Environments diagnosed as weak.", registry=r)
        self.sandbox_kills = Counter(
            "arena_sandbox_kills_total", "Sandbox jobs killed, by reason.", ["reason"], registry=r
        )
        self.errors = Counter("arena_errors_total", "Errors, by component.", ["component"], registry=r)
        self.admin_actions = Counter(
            "arena_admin_actions_total", "Admin API actions accepted.", ["action"], registry=r
        )
        # --- cluster mode (episodes on Ray workers; their model calls are recorded here too)
        self.cluster_workers = Gauge(
            "arena_cluster_workers",
            "Episode workers on the Ray cluster, by state (ready, starting).",
            ["state"],
            registry=r,
        )
        self.cluster_rescheduled = Counter(
            "arena_cluster_rescheduled_episodes_total",
            "Episodes sent to another worker because theirs was lost mid-episode.",
            registry=r,
        )
        # --- rollouts vs trainer (token chains, sampler mismatch)
        self.rollout_chain_breaks = Counter(
            "arena_rollout_chain_breaks_total",
            "GRPO episodes whose later turns were not trained: the prompt did not extend the token chain.",
            registry=r,
        )
        self.grpo_sampler_logprob_diff = Gauge(
            "arena_grpo_sampler_logprob_diff",
            "Mean |trainer - sampler| log-prob on trained tokens, last step (the off-policy mismatch).",
            registry=r,
        )
        self.grpo_importance_ratio = Gauge(
            "arena_grpo_importance_ratio",
            "Importance ratios of trained tokens, last step, by statistic (mean, min, max applied; peak before truncation).",
            ["stat"],
            registry=r,
        )
        self.weight_sync_bytes = Gauge(
            "arena_weight_sync_bytes",
            "Bytes written for the last update sent to the policy server, by kind (full weights or LoRA adapter).",
            ["kind"],
            registry=r,
        )
        self.weight_sync_seconds = Gauge(
            "arena_weight_sync_seconds",
            "Seconds until the policy server served the last update, by kind (full weights or LoRA adapter).",
            ["kind"],
            registry=r,
        )
        self._init_series()

    def _init_series(self) -> None:
        # Series that exist from the start, so dashboards and alerts see 0 rather than nothing.
        # The phase names come from the store (as `ops.phases.base.PHASE_ORDER` does): the phases
        # import the metrics, so the metrics never import a phase module.
        from arena.store import PHASES

        for phase in PHASES:
            self.current_phase.labels(phase=phase).set(0)
            self.phase_failures.labels(phase=phase)
        for role in ("policy", "helper"):
            self.tokens.labels(role=role)
        from arena.tasks.adversary import ADVERSARIES
        from simulate.sim_gates import SIM_GATES

        gates = (
            "gold",
            "adversary",
            *(f"adversary_{a}" for a in ADVERSARIES),
            *(f"sim_{g}" for g in SIM_GATES),
        )
        for gate in gates:
            for result in ("accepted", "rejected"):
                self.synthesis_gate.labels(gate=gate, result=result)
        for component in ("phase", "admin", "model", "store"):
            self.errors.labels(component=component)
        for decision in ("published", "held_back"):
            self.publish_decisions.labels(decision=decision)
        self.eval_tool_subset.set(-1)
        self.helper_judge_agreement.set(-1)
        self.helper_judge_false_pass.set(-1)
        self.paused.set(0)
        self.ready.set(0)
        self.weak_envs.set(0)

    # --- bounded labels ----------------------------------------------------------------------

    def set_known(self, environments: Iterable[str], categories: Iterable[str] = ()) -> None:
        """Declare the registry's environments and categories: the only allowed label values."""
        self._envs = set(environments)
        self._categories = set(categories)

    def env(self, name: str) -> str:
        """A safe `environment` label value."""
        return name if name in self._envs else OTHER

    def category(self, name: str) -> str:
        """A safe `category` label value."""
        return name if name in self._categories else OTHER

    @staticmethod
    def public_category(name: str) -> str:
        """A safe `category` label value of the public yardstick (BFCL's categories, τ²'s domains, `all`)."""
        from arena.public.bfcl.dist import CATEGORIES
        from ops.config_public import TAU2_DOMAINS

        return name if name in (*CATEGORIES, *TAU2_DOMAINS, "all") else OTHER

    # --- helpers ---------------------------------------------------------------------------------

    def enter_phase(self, phase: str | None) -> None:
        """Flag `phase` as current (None: between phases)."""
        from arena.store import PHASES

        for name in PHASES:
            self.current_phase.labels(phase=name).set(1 if name == phase else 0)
        self.phase_progress.set(0)
        if phase is not None:
            self.phase_started.set(time.time())

    def record_episode(self, environment: str, finish: str, reward: float) -> None:
        """Count one finished episode."""
        env = self.env(environment)
        self.episodes.labels(environment=env, finish=finish).inc()
        self.reward.labels(environment=env).observe(reward)

    def observe_model_call(self, role: str, backend: str, seconds: float, ok: bool = True) -> None:
        """Record one model call."""
        self.model_latency.labels(role=role, backend=backend).observe(seconds)
        if not ok:
            self.model_errors.labels(role=role, backend=backend).inc()

    def observe_call(self, record: Any) -> None:
        """One `simulate.calls.CallRecord`: every model call of the process (daemon and trainer rollouts).

        Called from whichever thread made the call; prometheus_client metrics are thread-safe.
        """
        role = record.role if record.role in ROLES else OTHER
        backend = record.backend if record.backend in ("local", "http") else OTHER
        self.observe_model_call(role, backend, record.latency_s, ok=record.ok)
        if record.completion_tokens:
            self.tokens.labels(role=role).inc(record.completion_tokens)
            if record.latency_s > 0:
                self.tokens_per_second.labels(role=role).set(record.completion_tokens / record.latency_s)

    def exposition(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_latest(self.registry)
