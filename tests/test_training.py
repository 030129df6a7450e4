"""Training loop and the learning-rate explorer, on tiny runs."""

import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from gpulib.style import use_korean_font  # noqa: E402

assert use_korean_font(), "the NanumGothic font of koreanize-matplotlib should be installed"

from gpulib.data import Split, load_digits  # noqa: E402  (after the font check)
from gpulib.figures.learning_rate_explorer import LearningRateExplorer, quadratic_path, quadratic_regime  # noqa: E402  (after the font check)
from gpulib.mlp import MLP, History, train  # noqa: E402  (after the font check)


@pytest.fixture(scope="module")
def tiny():
    d = load_digits()
    return Split(d.X_train[:64], d.y_train[:64], d.X_test[:40], d.y_test[:40])


def test_training_lowers_the_loss_and_records_history(tiny):
    model = MLP([64, 8, 10], seed=1)
    history = train(model, tiny, lr=0.5, epochs=2, batch_size=32, progress=False)
    assert len(history.step_loss) == 4
    assert len(history.epoch_test_acc) == 2 and len(history.epoch_train_acc) == 2
    assert history.step_loss[-1] < history.step_loss[0]
    assert not history.diverged


def test_evaluation_only_at_the_end(tiny):
    history = train(MLP([64, 8, 10]), tiny, lr=0.1, epochs=2, batch_size=64,
                    progress=False, evaluate_every_epoch=False)
    assert len(history.epoch_test_acc) == 1


def test_a_non_finite_loss_stops_training_early(tiny):
    model = MLP([64, 8, 10])
    W, b = model.params[0]
    poisoned = W.copy_to_host()
    poisoned[0, 0] = np.nan
    W.copy_to_device(poisoned)
    history = train(model, tiny, lr=0.1, epochs=3, batch_size=32, progress=False)
    assert len(history.step_loss) == 1 and math.isnan(history.step_loss[0])
    assert history.diverged


@pytest.mark.parametrize("settings, message", [
    (dict(epochs=0), "epochs must be a positive integer, not 0"),
    (dict(batch_size=2.5), "batch_size must be a positive integer, not 2.5"),
    (dict(lr=float("nan")), r"lr \(the learning rate\) must be a positive finite number, not nan"),
    (dict(lr="0.1"), r"lr \(the learning rate\) must be a positive number, not str"),
])
def test_bad_training_settings_are_refused_before_any_launch(tiny, settings, message, monkeypatch):
    model = MLP([64, 4, 10])
    monkeypatch.setattr(model, "loss_and_grads", lambda *a: pytest.fail("a step ran before the check"))
    with pytest.raises(ValueError, match=message):
        train(model, tiny, **dict(dict(lr=0.1, epochs=1, batch_size=8), **settings))


def test_a_split_with_too_few_labels_is_refused(tiny):
    from gpulib.data import Split

    short = Split(tiny.X_train, tiny.y_train[:-1], tiny.X_test, tiny.y_test)
    with pytest.raises(ValueError, match=r"data.X_train has \d+ rows but data.y_train has \d+ labels"):
        train(MLP([64, 4, 10]), short, lr=0.1, epochs=1, batch_size=8)


@pytest.mark.parametrize("lr, behaviour", [(0.1, "monotone"), (0.4, "oscillates"), (0.6, "diverges")])
def test_quadratic_path(lr, behaviour):
    path = quadratic_path(lr, curvature=4.0, theta0=1.0, steps=30)  # θ_{t+1} = (1 - 4η) θ_t
    np.testing.assert_allclose(path, (1 - 4 * lr) ** np.arange(31))
    if behaviour == "diverges":
        assert abs(path[-1]) > 1
    else:
        assert abs(path[-1]) < 1e-3
        assert (np.sign(path[1:]) != np.sign(path[:-1])).any() == (behaviour == "oscillates")


@pytest.mark.parametrize("losses, word", [
    ([2.3, 1.0, 0.5], "수렴 중 (손실 78% 감소)"),
    ([2.3, 2.0, 1.633], "천천히 내려감 (손실 29% 감소)"),  # a 29% fall is not "barely moving"
    ([2.3, 2.29, 2.25], "거의 움직이지 않음 (손실 2% 감소)"),
    ([2.3, 9.0, 2.0], "불안정 (손실이 튀어 오름)"),
    ([2.3, 3.0, 2.5], "발산"),
    ([2.3, float("nan")], "발산"),
])
def test_verdict(losses, word):
    assert LearningRateExplorer.verdict(History(0.1, step_loss=losses)) == word


@pytest.mark.parametrize("lr, word", [(0.2, "수렴"), (0.25, "수렴"), (0.4, "진동하며 수렴"),
                                      (0.5, "경계: ±θ₀ 사이를 영원히 오감"), (0.55, "발산")])
def test_quadratic_regime_has_a_boundary_at_eta_a_2(lr, word):
    assert quadratic_regime(lr, 4.0) == word
    if word.startswith("경계"):  # the path neither grows nor shrinks
        np.testing.assert_allclose(np.abs(quadratic_path(lr, 4.0, steps=50)), 1.0)


def test_explorer_trains_once_per_rate_and_reports(tiny, monkeypatch):
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    explorer = LearningRateExplorer(tiny, sizes=[64, 4, 10], epochs=1, batch_size=32,
                                    train_samples=32, lr=0.3)
    explorer.update(0.3)
    assert "η = 0.3: 손실" in explorer.status.value and "시험 정확도" in explorer.status.value
    assert bytes(explorer.plot.value).startswith(b"\x89PNG")
    first = explorer.runs[0.3]
    explorer.slider.value = 0.3  # same value: no new run
    explorer.wait(60)
    assert explorer.runs[0.3] is first and len(explorer.runs) == 1
    explorer.slider.value = 1.0  # a new value trains a new model
    explorer.wait(60)
    assert set(explorer.runs) == {0.3, 1.0}


def test_explorer_rounds_eta_as_the_slider_shows_it(tiny, monkeypatch):
    explorer = LearningRateExplorer(tiny, sizes=[64, 4, 10], epochs=1, batch_size=32, train_samples=32)
    explorer.update(10 ** -0.125)  # the slider's 0.750 is 0.74989...
    assert set(explorer.runs) == {0.75} and "η = 0.75:" in explorer.status.value
    fig = explorer.figure(10 ** -0.125)
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == ["η=0.75"]


def test_key_presses_during_a_training_give_one_more_training(tiny, monkeypatch):
    import threading

    explorer = LearningRateExplorer(tiny, sizes=[64, 4, 10], epochs=1, batch_size=32, train_samples=32)
    started, release, trained = threading.Event(), threading.Event(), []
    monkeypatch.setattr(explorer, "render_png", lambda lr: b"")

    def slow_run(lr):
        trained.append(lr)
        started.set()
        release.wait(30)  # the first training is still running while the keys are pressed
        return History(lr, step_loss=[2.3, 2.0])

    monkeypatch.setattr(explorer, "run", slow_run)
    explorer._on_change({"new": 0.2})
    assert started.wait(30)
    for lr in (0.3, 0.4, 0.5):
        explorer._on_change({"new": lr})
    release.set()
    explorer.wait(30)
    assert trained == [0.2, 0.5]  # the first, then only the newest
