# The Arena image: the daemon, its `db upgrade` init container and, in cluster mode, every Ray
# node (deploy/k8s/base, deploy/k8s/cluster). One image for all of them, because Ray refuses a
# driver and nodes whose Ray or Python versions differ.
#
#   docker build -t ghcr.io/example/arena:0.1.0 .                      # torch from PyPI (CUDA)
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu -t arena:cpu .
#
# The pods run it as uid 10001 with a read-only root filesystem; everything it writes goes to the
# data volume (/data) or /tmp.
FROM python:3.11-slim-bookworm

# torch first and pinned (pyproject.toml's pin): an unpinned resolve may pick another build.
# PyPI's Linux wheel is the CUDA build the daemon's trainer needs on a GPU node; the CPU index
# gives a much smaller image for CPU-only workers and try-outs.
ARG TORCH_INDEX_URL=https://pypi.org/simple
ARG TORCH_VERSION=2.13.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ARENA_DATA_DIR=/data

# bubblewrap: the sandbox of synthesized environments' code (refused at start-up, not weakened,
# where the pod's seccomp profile forbids its namespaces). tini reaps the sandbox's and Ray's
# child processes and forwards SIGTERM to the daemon, which stops at a safe point.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap tini \
    && rm -rf /var/lib/apt/lists/*

RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY arena ./arena
COPY simulate ./simulate
COPY curriculum ./curriculum
COPY diagnose ./diagnose
COPY work ./work
COPY trainer ./trainer
COPY ops ./ops
COPY config ./config
# The cluster extra (Ray) is in every image: the daemon is a Ray driver in cluster mode and the
# same image runs the Ray nodes. Installed, not editable: /src is not needed at run time.
RUN pip install ".[cluster]" \
    && mkdir -p /etc/arena && cp config/*.toml /etc/arena/ \
    && cd / && rm -rf /src

# The service user of the manifests (runAsUser/runAsGroup 10001) and of the systemd unit (arena).
RUN groupadd --system --gid 10001 arena \
    && useradd --system --uid 10001 --gid arena --home-dir /data --shell /usr/sbin/nologin arena \
    && mkdir -p /data && chown arena:arena /data
USER 10001:10001
WORKDIR /data

EXPOSE 8787
ENTRYPOINT ["tini", "--", "arena"]
CMD ["run", "--config", "/etc/arena/cluster.toml"]
