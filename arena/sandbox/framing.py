"""Length-prefixed framing between the pool and its workers.

Parent to worker: `!Q` length + a pickle of the job. Pickle is fine in that direction only: the
parent is trusted, the worker unpickles what the parent wrote.

Worker to parent: `!II` (header length, blob count), a JSON header, then each blob as `!Q` length
+ raw bytes. The parent never unpickles anything a worker sends: model-written code runs in the
worker and can write arbitrary bytes to the pipe, and unpickling them would hand it the daemon.
JSON and raw database images carry no code; sizes are capped so a hostile length cannot make the
parent allocate without bound.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the worker imports this module and must not load anyio (it pulls subprocess)
    from anyio.streams.buffered import BufferedByteReceiveStream

JOB_HEAD = struct.Struct("!Q")
REPLY_HEAD = struct.Struct("!II")
BLOB_HEAD = struct.Struct("!Q")

MAX_HEADER_BYTES = 64 << 20
MAX_BLOBS = 8
MAX_BLOB_BYTES = 1 << 30


class FrameError(Exception):
    """A frame from a worker is malformed or oversized (the worker is then treated as crashed)."""


def encode_job(job: Any) -> bytes:
    """One parent-to-worker frame."""
    body = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    return JOB_HEAD.pack(len(body)) + body


def encode_reply(header: dict[str, Any], blobs: list[bytes] | tuple[bytes, ...] = ()) -> list[bytes]:
    """One worker-to-parent frame, as pieces for `os.writev`."""
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    parts = [REPLY_HEAD.pack(len(head), len(blobs)), head]
    for blob in blobs:
        parts.append(BLOB_HEAD.pack(len(blob)))
        parts.append(blob)
    return parts


# ------------------------------------------------------------------ worker side (blocking fds)


def read_exact(fd: int, n: int) -> bytes:
    """Read exactly `n` bytes from a blocking fd; EOFError if the other end closed first."""
    chunks: list[bytes] = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("parent closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_job(fd: int) -> Any:
    """The next job the parent sent."""
    (size,) = JOB_HEAD.unpack(read_exact(fd, JOB_HEAD.size))
    return pickle.loads(read_exact(fd, size))


def write_all(fd: int, parts: list[bytes]) -> None:
    """Write every piece to a blocking fd."""
    views = [memoryview(p) for p in parts if p]
    while views:
        written = os.writev(fd, views[:64])
        while written and views:
            if written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][written:]
                written = 0


def read_reply_fd(fd: int) -> tuple[dict[str, Any], list[bytes]]:
    """A reply frame from a blocking fd (a worker reading its forked job's reply)."""
    head_len, n_blobs = REPLY_HEAD.unpack(read_exact(fd, REPLY_HEAD.size))
    if head_len > MAX_HEADER_BYTES or n_blobs > MAX_BLOBS:
        raise FrameError(f"oversized reply frame (header {head_len} bytes, {n_blobs} blobs)")
    header = json.loads(read_exact(fd, head_len))
    blobs = []
    for _ in range(n_blobs):
        (size,) = BLOB_HEAD.unpack(read_exact(fd, BLOB_HEAD.size))
        if size > MAX_BLOB_BYTES:
            raise FrameError(f"oversized blob in reply ({size} bytes)")
        blobs.append(read_exact(fd, size) if size else b"")
    return header, blobs


# ------------------------------------------------------------------ parent side (anyio streams)


async def read_reply(stream: BufferedByteReceiveStream) -> tuple[dict[str, Any], list[bytes]]:
    """The next reply frame of a worker: its JSON header and blobs."""
    head_len, n_blobs = REPLY_HEAD.unpack(await stream.receive_exactly(REPLY_HEAD.size))
    if head_len > MAX_HEADER_BYTES or n_blobs > MAX_BLOBS:
        raise FrameError(f"oversized reply frame (header {head_len} bytes, {n_blobs} blobs)")
    try:
        header = json.loads(await stream.receive_exactly(head_len))
    except ValueError as exc:
        raise FrameError(f"reply header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError("reply header is not a JSON object")
    blobs: list[bytes] = []
    for _ in range(n_blobs):
        (size,) = BLOB_HEAD.unpack(await stream.receive_exactly(BLOB_HEAD.size))
        if size > MAX_BLOB_BYTES:
            raise FrameError(f"oversized blob in reply ({size} bytes)")
        blobs.append(await stream.receive_exactly(size) if size else b"")
    return header, blobs
