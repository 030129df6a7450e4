"""Messages between the judge and the worker: length-prefixed pickles over two pipes.

The worker trusts the judge and reads with plain ``pickle``. The judge trusts nothing the worker
sends: it reads with ``SafeUnpickler``, which rebuilds only plain data (numbers, strings,
containers, NumPy arrays and scalars) and the tracer's record; a message naming any other class
or function is refused, so no message can make the judge run code.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time

# (module, name) pairs a worker's message may name
SAFE = frozenset({
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"), ("builtins", "slice"),
    ("builtins", "bytearray"), ("collections", "OrderedDict"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("gpulib.trace", "Trace"), ("gpulib.trace", "_Recorder"), ("gpulib.trace", "Race"),
    ("gpulib.trace", "DivergentBarrier"),
})
LIMIT = 1 << 30  # one message at most 1 GiB


class ChannelClosed(Exception):
    """The other side went away (the worker exited or was stopped)."""


class ChannelTimeout(Exception):
    """No answer within the time allowed."""


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"the worker's message names {module}.{name}, which the judge does not rebuild")


def safe_loads(data: bytes):
    return SafeUnpickler(io.BytesIO(data)).load()


def send(fd: int, message) -> None:
    data = pickle.dumps(message, protocol=4)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise ChannelTimeout()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise ChannelClosed()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive_bytes(fd: int, timeout: float | None = None) -> bytes:
    deadline = None if timeout is None else time.monotonic() + timeout
    (size,) = struct.unpack("<Q", _read_exactly(fd, 8, deadline))
    if size > LIMIT:
        raise ChannelClosed()
    return _read_exactly(fd, size, deadline)


def receive_trusted(fd: int):
    """What the worker does with the judge's messages."""
    return pickle.loads(receive_bytes(fd))


def receive_untrusted(fd: int, timeout: float | None = None):
    """What the judge does with the worker's messages."""
    return safe_loads(receive_bytes(fd, timeout))
