"""16.1, figure: the learning-rate explorer (ipywidgets + matplotlib).

Left: gradient descent θ ← θ - η f'(θ) on f(θ) = ½ a θ², drawn instantly: it converges for
η·a < 1, converges while oscillating for 1 < η·a < 2, bounces between ±θ₀ forever at η·a = 2
and diverges beyond. Right: the MLP trained on the digits with the gpulib kernels for the
chosen η; every run is kept, so curves can be compared.

η is rounded to the slider's three significant digits everywhere (training, legend, status),
so what the reader set is what the figure says. Training runs in a worker thread that takes
only the newest η: several key presses during one training give one more training, not one
each. ``quadratic_regimes`` is the static figure of the four regimes.
"""

from __future__ import annotations

import math
import threading

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


def quadratic_regime(lr: float, curvature: float) -> str:
    """The word for gradient descent on ½·a·θ² with step η: θ is multiplied by 1 - η·a each step."""
    ratio = lr * curvature
    if math.isclose(ratio, 2.0, rel_tol=1e-9):
        return "경계: ±θ₀ 사이를 영원히 오감"
    if ratio < 1 or math.isclose(ratio, 1.0):
        return "수렴"
    return "진동하며 수렴" if ratio < 2 else "발산"


def rounded(lr: float) -> float:
    """η as the slider shows it (three significant digits)."""
    return float(f"{lr:.3g}")


def quadratic_regimes(curvature: float = 4.0, ratios=(0.5, 1.5, 2.0, 2.2), steps: int = 12):
    """A static figure: θ_t for η·a in ``ratios`` (below 1, between 1 and 2, exactly 2, above 2)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ratios), figsize=(3.2 * len(ratios), 2.9), sharey=True)
    for ax, ratio in zip(axes, ratios):
        lr = ratio / curvature
        path = quadratic_path(lr, curvature, steps=steps)
        ax.axhline(0, color="0.7", lw=0.8)
        ax.plot(np.arange(steps + 1), np.clip(path, -3, 3), "o-", ms=3, color="tab:red")
        ax.set_title(f"η·a = {ratio:g}: {quadratic_regime(lr, curvature)}", fontsize=9)
        ax.set_xlabel("스텝")
        ax.set_ylim(-3.2, 3.2)
    axes[0].set_ylabel("θ (±3에서 자름)")
    fig.suptitle(f"f(θ) = ½·{curvature:g}·θ² 위의 경사 하강: θ는 매 스텝 (1 − η·a)배가 된다", fontsize=10)
    fig.tight_layout()
    return fig


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
        self._lock = threading.Lock()
        self._pending: float | None = None
        self._worker: threading.Thread | None = None
        self.slider = widgets.FloatLogSlider(
            value=lr, base=10, min=-2, max=1, step=0.125, description="η",
            continuous_update=False, readout_format=".3g",
        )
        self.status = widgets.HTML()
        # The figure travels as PNG bytes in an Image widget: no output capture is involved,
        # so it updates the same way in JupyterLab, VS Code and a headless nbclient run.
        self.plot = widgets.Image(format="png")
        self.slider.observe(self._on_change, names="value")
        self.view = widgets.VBox([self.slider, self.status, self.plot])

    def run(self, lr: float) -> History:
        """Train a fresh MLP (same initial weights every time) with learning rate ``lr``
        (rounded as the slider shows it)."""
        lr = rounded(lr)
        if lr not in self.runs:
            model = MLP(self.sizes, seed=self.seed)
            self.runs[lr] = train(model, self.data, lr, self.epochs, self.batch_size,
                                  seed=self.seed, progress=False, evaluate_every_epoch=False)
        return self.runs[lr]

    def _on_change(self, change) -> None:
        """Queue the newest η for the worker; start it if it is idle. Values that arrive while a
        training runs replace one another, so only the last of them is trained next."""
        with self._lock:
            self._pending = change["new"]
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(target=self._drain, daemon=True)
            self._worker.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                lr, self._pending = self._pending, None
                if lr is None:
                    self._worker = None
                    return
            try:
                self.update(lr)
            except Exception as err:  # shown where the reader looks, not lost in a thread
                self.status.value = f"η = {lr:.3g}: 오류 {type(err).__name__}: {err}"

    def wait(self, timeout: float | None = None) -> None:
        """Block until the worker has trained every queued η (for scripts and tests)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    @staticmethod
    def verdict(history: History) -> str:
        """A word for the run: diverged, unstable, converging, slowly falling or barely moving,
        with how much the loss fell from the first step to the last."""
        losses = history.step_loss
        if not all(math.isfinite(v) for v in losses) or losses[-1] > losses[0]:
            return "발산"
        if max(losses) > 1.5 * losses[0]:
            return "불안정 (손실이 튀어 오름)"
        fall = 1 - losses[-1] / losses[0]
        if fall >= 0.5:
            return f"수렴 중 (손실 {fall:.0%} 감소)"
        if fall >= 0.05:
            return f"천천히 내려감 (손실 {fall:.0%} 감소)"
        return f"거의 움직이지 않음 (손실 {fall:.0%} 감소)"

    def update(self, lr: float) -> None:
        lr = rounded(lr)
        self.status.value = f"η = {lr:.3g}: gpulib 커널로 학습하는 중..."
        history = self.run(lr)
        first, last = history.step_loss[0], history.step_loss[-1]
        text = f"η = {lr:.3g}: 손실 {first:.3f} → {last:.3g}, {self.verdict(history)}"
        if history.epoch_test_acc:
            text += f"; 시험 정확도 {history.epoch_test_acc[-1]:.1%}"
        self.status.value = text
        self.plot.value = self.render_png(lr)

    def render_png(self, lr: float) -> bytes:
        """The figure for ``lr`` as PNG bytes."""
        import io

        import matplotlib.pyplot as plt

        fig = self.figure(lr)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        plt.close(fig)
        return buffer.getvalue()

    def draw(self, lr: float) -> None:
        """Show the figure for ``lr`` in the notebook (outside the widget)."""
        import matplotlib.pyplot as plt

        self.figure(lr)
        plt.show()

    def figure(self, lr: float):
        """Left: the quadratic's path for ``lr``; right: every MLP run's loss, ``lr`` in red."""
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter

        lr = rounded(lr)
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
        path = quadratic_path(lr, self.curvature)
        grid = np.linspace(-1.6, 1.6, 200)
        left.plot(grid, 0.5 * self.curvature * grid**2, color="0.6")
        inside = np.abs(path) <= 1.6
        escaped = not inside.all()
        shown = path[: np.argmin(inside)] if escaped else path  # stop where the path leaves the plot
        left.plot(shown, 0.5 * self.curvature * shown**2, "o-", color="tab:red", ms=3)
        ratio = lr * self.curvature
        state = quadratic_regime(lr, self.curvature)
        note = f", {len(shown)}번째 이후 그림 밖으로" if escaped else ""
        left.set_title(f"f(θ) = ½·{self.curvature:g}·θ² 위의 경사 하강: η·a = {ratio:.2g}, {state}{note}",
                       fontsize=10)
        left.set_xlabel("θ")
        for other, hist in sorted(self.runs.items()):
            losses = np.array(hist.step_loss, dtype=float)
            losses[~np.isfinite(losses)] = np.nan
            style = dict(lw=2.2, color="tab:red") if other == lr else dict(lw=1, alpha=0.5)
            right.plot(np.arange(1, len(losses) + 1), losses, label=f"η={other:.3g}", **style)
        finite = [v for h in self.runs.values() for v in h.step_loss if math.isfinite(v) and v > 0]
        if finite and max(finite) / min(finite) > 20:  # several decades: a log axis shows them all
            right.set_yscale("log")
            right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # no mathtext minus
            right.yaxis.set_minor_formatter(NullFormatter())
            right.set_ylabel("학습 손실 (로그 눈금)")
        else:
            right.set_ylabel("학습 손실")
        right.set_xlabel("스텝")
        right.set_title(f"MLP {'-'.join(map(str, self.sizes))}, 손글씨 숫자 {len(self.data.X_train)}개")
        right.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        return fig

    def show(self):
        """Display the widget and draw the initial η."""
        from IPython.display import display

        display(self.view)
        self.update(self.slider.value)
