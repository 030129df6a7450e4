"""16.1: mini-batch gradient descent on an MLP, with a progress bar and a loss history."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gpulib.arrays import require_bool, require_int, require_learning_rate
from gpulib.data import Split, check_split
from gpulib.mlp.model import MLP


@dataclass
class History:
    """Loss after every step, and train/test accuracy after every epoch."""

    lr: float
    step_loss: list[float] = field(default_factory=list)
    epoch_train_acc: list[float] = field(default_factory=list)
    epoch_test_acc: list[float] = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        """True when the loss became NaN/inf or ended far above where it started."""
        losses = self.step_loss
        if not losses:
            return False
        return not all(math.isfinite(v) for v in losses) or losses[-1] > 2 * losses[0]


class _Progress:
    """An ipywidgets progress bar in Jupyter; silent elsewhere."""

    def __init__(self, total: int, label: str, show: bool):
        self.bar = None
        if not show:
            return
        try:
            import ipywidgets as widgets
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is None:
            return
        self.bar = widgets.IntProgress(value=0, min=0, max=total, description=label)
        self.text = widgets.Label(value="")
        display(widgets.HBox([self.bar, self.text]))

    def update(self, done: int, message: str) -> None:
        if self.bar is not None:
            self.bar.value = done
            self.text.value = message


def train(model: MLP, data: Split, lr: float, epochs: int, batch_size: int, seed: int = 0,
          progress: bool = True, verbose: bool = False, evaluate_every_epoch: bool = True) -> History:
    """Train ``model`` on ``data`` with mini-batch SGD; every step runs on gpulib kernels.

    Each epoch shuffles the training set (with ``seed``) and takes one step per batch. A
    diverging run (the loss turns NaN or infinite) stops early instead of wasting time.
    Accuracy is measured after every epoch, or only after the last one when
    ``evaluate_every_epoch`` is False (cheaper on the simulator).
    """
    lr = require_learning_rate(lr)  # everything is checked before the first launch
    for name, flag in (("progress", progress), ("verbose", verbose), ("evaluate_every_epoch", evaluate_every_epoch)):
        require_bool(flag, name)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if not all(callable(getattr(model, m, None)) for m in ("loss_and_grads", "step", "accuracy")):
        raise ValueError(f"model must be a gpulib.mlp.MLP (or a CNN of gpulib.cnn: loss_and_grads, step and accuracy), "
                         f"not {type(model).__name__}")
    check_split(data)
    features = model.sizes[0] if isinstance(model, MLP) else int(np.prod(model.image_shape))
    if data.X_train.shape[1] != features:
        raise ValueError(f"data has {data.X_train.shape[1]} features but the model takes {features}")
    classes = model.sizes[-1] if isinstance(model, MLP) else model.classes
    for part, y in (("y_train", data.y_train), ("y_test", data.y_test)):
        if y.max() >= classes:
            raise ValueError(f"data.{part} holds label {y.max()}, but the model has {classes} classes (0..{classes - 1})")
    seed = require_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    n = len(data.X_train)
    steps_per_epoch = math.ceil(n / batch_size)
    history = History(lr)
    bar = _Progress(epochs * steps_per_epoch, f"η={lr:g}", progress)
    for epoch in range(epochs):
        order = rng.permutation(n)
        for step in range(steps_per_epoch):
            idx = order[step * batch_size:(step + 1) * batch_size]
            X = np.ascontiguousarray(data.X_train[idx])
            y = np.ascontiguousarray(data.y_train[idx])
            loss, grads = model.loss_and_grads(X, y)
            history.step_loss.append(loss)
            if not math.isfinite(loss):
                bar.update(epoch * steps_per_epoch + step + 1, "diverged (loss is not finite)")
                return history
            model.step(grads, lr)
            bar.update(epoch * steps_per_epoch + step + 1, f"epoch {epoch + 1}, loss {loss:.3f}")
        if not evaluate_every_epoch and epoch < epochs - 1:
            continue
        history.epoch_train_acc.append(model.accuracy(data.X_train, data.y_train))
        history.epoch_test_acc.append(model.accuracy(data.X_test, data.y_test))
        if verbose:
            print(f"epoch {epoch + 1:3d}: loss {np.mean(history.step_loss[-steps_per_epoch:]):.4f}, "
                  f"train accuracy {history.epoch_train_acc[-1]:.1%}, "
                  f"test accuracy {history.epoch_test_acc[-1]:.1%}")
    return history
