"""16.6: a training step recorded once and replayed: the launches without Python's work per launch.

    with record() as rec:                 # the step runs once, every launch is kept
        losses, grads = model.device_loss_and_grads(X_buf, y_buf)
        model.step(grads, lr)
    rec.replay()                          # the same launches on the same buffers, again
    graph = rec.graph()                   # on a GPU: one CUDA graph of them all
    graph.replay()

The recorder is a watcher of gpulib.launch: it keeps each kernel launch as Numba handed it to
cuda.core (on a GPU) or as the simulator's call, and each cuBLAS call as a call, with every
array alive. What a replay would not repeat is refused at once with ``RecordingError``: a copy
between host and device, or between device arrays. ``ReplayedStep`` does all of it for a
``BookCNN``; the notebook (16.6) says why it pays and when it does not.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from gpulib import launch
from gpulib.arrays import is_device_array, require_bool, require_int, require_int_labels, require_learning_rate, to_device
from gpulib.env import cuda, on_gpu


class RecordingError(RuntimeError):
    """Something happened during a recording that a replay would not repeat."""


@dataclass
class Recording:
    """The launches of one recorded run, in order (see the module docstring)."""

    entries: list = field(default_factory=list)  # (kind, name, replay data)
    keep: list = field(default_factory=list)  # every argument seen, kept alive
    _calls: list | None = None  # one ready-made call per entry, built at the first replay

    @property
    def names(self) -> list[str]:
        """The kernel (or library call) of each recorded launch."""
        return [name for _, name, _ in self.entries]

    def replay(self) -> None:
        """Launch every recorded kernel (and call every recorded library function) again, in order."""
        if self._calls is None:
            self._calls = [_replay_call(kind, data) for kind, _, data in self.entries]
        for call in self._calls:
            call()

    def graph(self) -> "Graph":
        """One CUDA graph holding every recorded launch (GPU only; kernel launches only)."""
        if not on_gpu():
            raise RecordingError("CUDA graphs need a GPU; on the simulator use replay()")
        if any(kind != "cuda" for kind, _, _ in self.entries):
            library = sorted({name for kind, name, _ in self.entries if kind != "cuda"})
            raise RecordingError(f"a CUDA graph holds kernel launches only, but the recording has {library}; "
                                 "use replay(), or a conv algorithm that does not call cuBLAS")
        from cuda.core import Device, launch

        device = Device()
        device.set_current()
        builder = device.create_graph_builder().begin_building()
        for _, _, (_, config, kernel, args) in self.entries:
            launch(builder, config, kernel, *args)
        return Graph(builder.end_building().complete(), device.default_stream, self)


@dataclass
class Graph:
    """A recording as one CUDA graph: ``replay()`` is one launch, on the stream gpulib uses."""

    graph: object
    stream: object
    recording: Recording  # keeps the buffers alive

    def replay(self) -> None:
        self.graph.launch(self.stream)


_active: list[Recording] = []


def _replay_call(kind: str, data):
    """A call with no arguments that repeats one recorded entry."""
    if kind == "cuda":  # the very call Numba made to cuda.core, its arguments already converted
        return functools.partial(launch.replay_prepared, data)
    return data  # the launch (or library call) made again, through whatever watches then


def _refused(what: str, original, allowed: list):
    """``original`` made to raise RecordingError, except inside a recorded library call
    (``allowed`` non-empty), which a replay repeats whole, its copies included."""
    def guarded(*args, **kwargs):
        if allowed:
            return original(*args, **kwargs)
        raise RecordingError(f"{what} during a recording: a replay would not repeat it. Fill input buffers "
                             "before recording and copy results back after it")
    return guarded


class _Recorder(launch.Watcher):
    """What ``record()`` installs: every launch kept, with what replays it."""

    def __init__(self, rec: Recording):
        self.rec, self.in_library = rec, []

    def launch(self, call: launch.Launch):
        self.rec.keep.append(call.args)
        if call.kind == "library":
            self.rec.entries.append(("library", call.name, call.again))
            self.in_library.append(True)
            try:
                return call.go()
            finally:
                self.in_library.pop()
        if not on_gpu():
            self.rec.entries.append(("sim", call.name, call.again))
        return call.go()

    def prepared(self, name: str, prepared: tuple) -> None:
        self.rec.entries.append(("cuda", name, prepared))


@contextlib.contextmanager
def record():
    """Record every launch inside the block (see the module docstring); yields the Recording."""
    if _active:
        raise RecordingError("a recording is already active; recordings do not nest")
    rec = Recording()
    recorder = _Recorder(rec)
    undo = []

    def refuse(owner, name, what):
        original = getattr(owner, name)
        setattr(owner, name, _refused(what, original, recorder.in_library))
        undo.append(lambda: setattr(owner, name, original))

    refuse(cuda, "to_device", "a copy to the device (cuda.to_device)")
    device_array = type(cuda.device_array(1, np.float32))
    for method in ("copy_to_host", "copy_to_device"):
        refuse(device_array, method, f"a device array's {method}")
    _active.append(rec)
    try:
        with launch.watching(recorder):
            yield rec
    finally:
        _active.pop()
        while undo:
            undo.pop()()


@cuda.jit
def stage_inputs_kernel(X, labels, X_buf, labels_buf, classes, bad):
    """The step's inputs copied into its buffers (flat X and labels) and checked on the way:
    bad[0] = 1 if an element of X is NaN or infinite, bad[1] = 1 if a label lies outside
    [0, classes). ``bad`` starts at 0 and is set back to 0 by the host after a bad batch."""
    i = cuda.grid(1)
    if i < X.shape[0]:
        v = X[i]
        X_buf[i] = v
        if math.isnan(v) or math.isinf(v):
            bad[0] = 1
    if i < labels.shape[0]:
        label = labels[i]
        labels_buf[i] = label
        if label < 0 or label >= classes:
            bad[1] = 1


class ReplayedStep:
    """Training steps of a ``BookCNN`` on batches of one size, recorded once and replayed.

        step = ReplayedStep(model, batch=256, lr=0.05)
        loss = step(X, labels)      # the same result as model.loss_and_grads + model.step

    Every call checks X and the labels as the eager step does and copies them into the step's
    input buffers (device arrays of the step's shapes in one launch, stage_inputs_kernel, that
    copies and checks at once, and one read of its flags). The first call runs the step once to compile its kernels and settle the
    auto-tuner's picks, then runs it again while recording (that run is the step the call
    returns); later calls replay the recording. ``graph=True`` replays it as one CUDA graph
    where there is a GPU and the step calls no cuBLAS; otherwise it replays the launches and
    ``graph_error`` says why. The recording holds the model's parameter buffers: when they are no
    longer the model's (``model.params`` replaced, or a buffer swapped), the next call notices and
    records the step again on the new ones.
    """

    def __init__(self, model, batch: int, lr: float, graph: bool = False):
        from gpulib.cnn.book_model import BookCNN

        if not isinstance(model, BookCNN):
            raise ValueError(f"model must be a gpulib.cnn.book_model.BookCNN (its device_loss_and_grads is what is "
                             f"recorded), not {type(model).__name__}")
        require_bool(graph, "graph")
        self.model, self.batch = model, require_int(batch, "batch", 1)
        self.lr = require_learning_rate(lr)
        self.want_graph = graph
        self.X = cuda.device_array((self.batch, *model.image_shape), np.float32)
        self.labels = cuda.device_array(self.batch, np.int32)
        self.recording: Recording | None = None
        self.graph: Graph | None = None
        self.graph_error: str | None = None  # why graph=True could not build one
        self._bad = cuda.to_device(np.zeros(2, np.int32))  # stage_inputs_kernel's two flags

    def _staged(self, X, labels) -> bool:
        """Device X [batch, *image_shape] float32 and labels [batch] int32, C-contiguous: copied into
        the step's buffers and their values checked by one launch and one read of two flags (in
        place of two checks and two copies, each waiting for the GPU). False, with nothing
        copied, for anything else; False too where a flag is set (the caller's checks then say
        what is wrong)."""
        shape = (self.batch, *self.model.image_shape)
        for a, want, dtype in ((X, shape, np.float32), (labels, (self.batch,), np.int32)):
            if not (is_device_array(a) and tuple(a.shape) == want and a.dtype == dtype and a.is_c_contiguous()):
                return False
        flat = X.reshape(X.size)
        stage_inputs_kernel[-(-X.size // 256), 256](flat, labels, self.X.reshape(X.size), self.labels,
                                                    self.model.classes, self._bad)
        if self._bad.copy_to_host().any():
            self._bad.copy_to_device(np.zeros(2, np.int32))
            return False
        return True

    def _run(self):
        losses, grads = self.model.device_loss_and_grads(self.X, self.labels)
        self.model.step(grads, self.lr)
        return losses

    def __call__(self, X, labels) -> float:
        """One SGD step on (X, labels); returns the batch's mean loss."""
        if not self._staged(X, labels):  # NumPy arrays, or a bad batch: checked and copied one by one
            from gpulib.cnn.model import images_on_device

            X = images_on_device(X, self.model.image_shape)
            if X.shape[0] != self.batch:
                raise ValueError(f"X holds {X.shape[0]} images, this step was built for batches of {self.batch}")
            require_int_labels(labels, "labels", self.batch, self.model.classes)
            self.X.copy_to_device(X)
            self.labels.copy_to_device(to_device(labels))
        if self.recording is not None and self._recorded_params != [id(p) for p in self.model.params]:
            self.recording = self.graph = None  # the model's buffers changed since the recording: record anew
        if self.recording is None:
            self.model.device_loss_and_grads(self.X, self.labels)  # compile, tune, fill caches
            with record() as rec:
                self.losses = self._run()
            self.recording = rec
            self._recorded_params = [id(p) for p in self.model.params]
            if self.want_graph and on_gpu():
                try:
                    self.graph = rec.graph()
                except Exception as err:  # the launches still replay; the reason is kept
                    self.graph_error = f"{type(err).__name__}: {err}"
        elif self.graph is not None:
            self.graph.replay()
        else:
            self.recording.replay()
        return float(self.losses.copy_to_host().mean(dtype=np.float64))

