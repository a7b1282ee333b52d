"""The `[cluster]` section: where episodes run (in the daemon's process, or on a Ray cluster)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ops.config_sections import ConfigSection


class ClusterConfig(ConfigSection):
    """Cluster mode: episodes on Ray workers, the round loop and the store staying with the daemon."""

    backend: Literal["local", "ray"] = Field(
        "local",
        description="local: every episode runs in the daemon's process; ray: EVALUATE's, TRAIN's and the "
        "yardstick's episodes and task synthesis run on Ray workers (needs a PostgreSQL store and "
        "`pip install .[cluster]`).",
    )
    address: str = Field(
        "auto",
        min_length=1,
        description="The Ray cluster to join (ARENA_RAY_ADDRESS): host:port of the head's GCS, ray://host:port "
        "for Ray Client, or auto (the cluster this host belongs to).",
    )
    namespace: str = Field("arena", min_length=1, description="Ray namespace of the daemon's workers.")
    workers: int = Field(
        2, ge=1, le=4096, description="Episode workers (Ray actors), spread over the cluster's nodes."
    )
    worker_cpus: float = Field(
        1.0, gt=0, description="CPUs each worker reserves on its node (the Ray scheduler places by this)."
    )
    worker_concurrency: int = Field(
        4, ge=1, le=1024, description="Episodes in flight on one worker at a time."
    )
    batch_size: int = Field(
        4,
        ge=1,
        le=1024,
        description="Evaluation episodes sent to a worker in one call: each call costs the daemon about "
        "1 ms of CPU (Ray's dispatch, the reply, its commit), so short episodes go in batches; a batch is "
        "committed when all of it is back, and a lost worker's batch runs again elsewhere.",
    )
    connect_timeout_s: float = Field(
        60.0, gt=0, description="How long start-up waits for the cluster and the first worker."
    )
    worker_start_timeout_s: float = Field(
        120.0,
        gt=0,
        description="How long a replacement worker may take to be placed and load (it is dropped after).",
    )
