"""Which policy replicas a cluster worker samples from: exactly those the daemon says serve.

Both a worker's episodes (`ops.cluster.worker`) and TRAIN's rollouts (`ops.cluster.rollouts`) follow
the daemon's view; here so that neither of those modules imports the other for it.
"""

from __future__ import annotations

from typing import Any


def follow_daemon(pool: Any, serving: list[str]) -> None:
    """Make `pool`'s serving replicas exactly `serving`, and let none return by itself."""
    from simulate.replicas import server_root

    if pool is None:
        return
    if pool.restore is None:
        pool.set_restore(_restore_is_the_daemons)
    live = {server_root(u) for u in serving}
    for replica in pool.replicas:
        if replica.url in live:
            pool.readmit(replica)
        else:
            pool.eject(replica, "not serving the live weights for the daemon")


async def _restore_is_the_daemons(url: str) -> None:
    raise RuntimeError(f"{url} returns when the daemon has given it the live weights")
