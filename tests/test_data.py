"""Digits loading and the MNIST IDX reader, on small IDX files written here."""

import gzip

import numpy as np
import pytest

from gpulib.data import load_digits, load_mnist, read_idx, write_idx


def test_digits_split_is_real_stratified_and_scaled():
    d = load_digits(test_fraction=0.2, seed=0)
    assert d.X_train.shape[1] == 64 and d.X_train.dtype == np.float32
    assert len(d.X_train) + len(d.X_test) == 1797
    assert 0.0 <= d.X_train.min() and d.X_train.max() <= 1.0 and d.X_train.std() > 0.1
    assert set(np.unique(d.y_test)) == set(range(10)) and d.num_classes == 10
    train_rows = {r.tobytes() for r in d.X_train}
    assert sum(r.tobytes() in train_rows for r in d.X_test) < 10  # (a few digits are duplicates)


def test_digits_split_depends_on_the_seed():
    a, b = load_digits(seed=0), load_digits(seed=1)
    assert not np.array_equal(a.y_train, b.y_train)


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_idx_round_trip(tmp_path, rng, suffix, dtype):
    arr = (rng.standard_normal((3, 5, 4)) * 50).astype(dtype)
    path = tmp_path / f"a.idx{suffix}"
    write_idx(path, arr)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and np.array_equal(back, arr)


def test_idx_header_is_mnist_compatible(tmp_path):
    # MNIST labels: magic 0x00000801 then the count, then one byte per label
    raw = bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1])
    (tmp_path / "labels").write_bytes(raw)
    assert read_idx(tmp_path / "labels").tolist() == [7, 2, 1]


@pytest.mark.parametrize("raw, message", [
    (b"\x00\x00", "too short"),
    (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "first two bytes must be zero"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "unknown IDX data type 0x07"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x05\x05", "needs 5 data bytes, the file has 1"),
    (b"\x00\x00\x08\x02\x00\x00\x00\x05", "ends early"),
])
def test_bad_idx_files_are_rejected(tmp_path, raw, message):
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(ValueError, match=message):
        read_idx(tmp_path / "bad")


def write_fake_mnist(directory, rng, n_train=6, n_test=4, gz=True):
    suffix = ".gz" if gz else ""
    for stem, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        write_idx(directory / f"{stem}-images-idx3-ubyte{suffix}", images)
        write_idx(directory / f"{stem}-labels-idx1-ubyte{suffix}", labels)


def test_load_mnist_from_idx_files(tmp_path, rng):
    write_fake_mnist(tmp_path, rng)
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz") as f:
        first = np.frombuffer(f.read()[16:16 + 784], np.uint8)
    split = load_mnist(tmp_path)
    assert split.X_train.shape == (6, 784) and split.X_test.shape == (4, 784)
    assert split.X_train.dtype == np.float32 and split.y_train.dtype == np.int32
    np.testing.assert_allclose(split.X_train[0], first / 255.0, rtol=1e-6)


def test_load_mnist_reports_missing_files_and_mismatches(tmp_path, rng):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path)
    write_fake_mnist(tmp_path, rng, gz=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="4 images but 3 labels"):
        load_mnist(tmp_path)


def test_load_mnist_refuses_labels_and_pixels_it_cannot_use(tmp_path, rng):
    write_fake_mnist(tmp_path, rng, gz=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([0, 1, 200, 3], np.uint8))
    with pytest.raises(ValueError, match=r"labels must be the digits 0..9, found uint8 values 0..200"):
        load_mnist(tmp_path)
    write_fake_mnist(tmp_path, rng, gz=False)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", rng.integers(0, 1000, (4, 28, 28)).astype(np.int16))
    with pytest.raises(ValueError, match=r"images must be unsigned bytes .* not int16"):
        load_mnist(tmp_path)


def test_a_corrupt_gzip_file_is_a_value_error_naming_it(tmp_path):
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(b"\x1f\x8b this is not gzip data")
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte.gz: cannot be read as gzip"):
        read_idx(path)
