"""16.1: the learning-rate explorer (ipywidgets + matplotlib).

Left: gradient descent θ ← θ - η f'(θ) on f(θ) = ½ a θ², drawn instantly: it converges for
η < 2/a, oscillates as η nears 2/a and diverges beyond. Right: the MLP trained on the digits
with the gpulib kernels for the chosen η; every run is kept, so curves can be compared.
"""

from __future__ import annotations

import math

import numpy as np

from gpulib.data import Split
from gpulib.mlp.model import MLP
from gpulib.mlp.train import History, train


def quadratic_path(lr: float, curvature: float = 1.0, theta0: float = 1.0, steps: int = 20):
    """θ after each step of gradient descent on ½·a·θ²: θ_{t+1} = (1 - η a) θ_t."""
    theta = [theta0]
    for _ in range(steps):
        theta.append(theta[-1] - lr * curvature * theta[-1])
    return np.array(theta)


class LearningRateExplorer:
    """Pick η on a log slider; see the quadratic's path and the MLP's training loss for it."""

    def __init__(self, data: Split, sizes, epochs: int, batch_size: int, train_samples: int,
                 lr: float = 0.1, curvature: float = 4.0, seed: int = 0):
        import ipywidgets as widgets

        self.data = Split(data.X_train[:train_samples], data.y_train[:train_samples],
                          data.X_test, data.y_test)
        self.sizes, self.epochs, self.batch_size, self.seed = sizes, epochs, batch_size, seed
        self.curvature = curvature
        self.runs: dict[float, History] = {}
        self.slider = widgets.FloatLogSlider(
            value=lr, base=10, min=-2, max=1, step=0.125, description="η",
            continuous_update=False, readout_format=".3g",
        )
        self.status = widgets.HTML()
        self.plot = widgets.Output()
        self.slider.observe(self._on_change, names="value")
        self.view = widgets.VBox([self.slider, self.status, self.plot])

    def run(self, lr: float) -> History:
        """Train a fresh MLP (same initial weights every time) with learning rate ``lr``."""
        lr = float(f"{lr:.4g}")
        if lr not in self.runs:
            model = MLP(self.sizes, seed=self.seed)
            self.runs[lr] = train(model, self.data, lr, self.epochs, self.batch_size,
                                  seed=self.seed, progress=False)
        return self.runs[lr]

    def _on_change(self, change) -> None:
        self.update(change["new"])

    def update(self, lr: float) -> None:
        self.status.value = f"η = {lr:.3g}: training with the gpulib kernels..."
        history = self.run(lr)
        last = history.step_loss[-1]
        verdict = ("diverged" if history.diverged else "converging" if last < 0.7 * history.step_loss[0]
                   else "barely moving")
        if history.epoch_test_acc:
            self.status.value = (
                f"η = {lr:.3g}: loss {history.step_loss[0]:.3f} → {last:.3g} ({verdict}); "
                f"test accuracy {history.epoch_test_acc[-1]:.1%}"
            )
        else:
            self.status.value = f"η = {lr:.3g}: the loss became {last} - diverged"
        self.plot.clear_output(wait=True)
        with self.plot:
            self.draw(lr)

    def draw(self, lr: float):
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
        path = quadratic_path(lr, self.curvature)
        grid = np.linspace(-1.6, 1.6, 200)
        left.plot(grid, 0.5 * self.curvature * grid**2, color="0.6")
        shown = np.clip(path, -1.6, 1.6)
        left.plot(shown, 0.5 * self.curvature * shown**2, "o-", color="tab:red", ms=3)
        left.set_title(f"f(θ) = ½·{self.curvature:g}·θ²: η·a = {lr * self.curvature:.2g} "
                       f"({'converges' if lr * self.curvature < 2 else 'diverges'}: needs < 2)")
        left.set_xlabel("θ")
        for other, hist in sorted(self.runs.items()):
            losses = np.array(hist.step_loss, dtype=float)
            losses[~np.isfinite(losses)] = np.nan
            style = dict(lw=2.2, color="tab:red") if math.isclose(other, float(f"{lr:.4g}")) else dict(lw=1, alpha=0.5)
            right.plot(np.arange(1, len(losses) + 1), losses, label=f"η={other:g}", **style)
        right.set_yscale("log")
        right.set_xlabel("step")
        right.set_ylabel("training loss")
        right.set_title(f"MLP {self.sizes} on the digits")
        right.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        plt.show()

    def show(self):
        """Display the widget and draw the initial η."""
        from IPython.display import display

        display(self.view)
        self.update(self.slider.value)
