"""Data sets: scikit-learn's bundled 8x8 digits (the default) and a reader for MNIST IDX files."""

from __future__ import annotations

import gzip
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpulib.arrays import require_int


@dataclass
class Split:
    """Features (float32, one sample per row) and integer labels of a train/test split."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def num_features(self) -> int:
        return self.X_train.shape[1]

    @property
    def num_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def check_split(data: Split) -> None:
    """ValueError unless the split is usable for training: 2-D float32 features with the same
    width in train and test, and 1-D integer labels, one per row."""
    if not isinstance(data, Split):
        raise ValueError(f"data must be a gpulib.data.Split, not {type(data).__name__}")
    for part in ("train", "test"):
        X, y = getattr(data, f"X_{part}"), getattr(data, f"y_{part}")
        X_name, y_name = f"data.X_{part}", f"data.y_{part}"
        if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float32):
            raise ValueError(f"{X_name} must be a 2-D float32 NumPy array [N, features], not "
                             f"{getattr(X, 'dtype', type(X).__name__)} of shape {getattr(X, 'shape', None)}")
        if not (isinstance(y, np.ndarray) and y.ndim == 1 and y.dtype.kind in "iu"):
            raise ValueError(f"{y_name} must be a 1-D integer NumPy array [N], not "
                             f"{getattr(y, 'dtype', type(y).__name__)} of shape {getattr(y, 'shape', None)}")
        if len(X) != len(y) or len(X) == 0:
            raise ValueError(f"{X_name} has {len(X)} rows but {y_name} has {len(y)} labels; they must be equal "
                             f"and not zero")
        if not np.isfinite(X).all():
            raise ValueError(f"{X_name} holds NaN or infinite values, which would turn the training into NaN")
        if y.min() < 0:
            raise ValueError(f"{y_name} holds negative labels ({y.min()}); class numbers start at 0")
    if data.X_train.shape[1] != data.X_test.shape[1]:
        raise ValueError(f"data.X_train has {data.X_train.shape[1]} features but data.X_test has "
                         f"{data.X_test.shape[1]}")


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Split:
    """The 1,797 handwritten digits (8x8, 16 grey levels) bundled with scikit-learn.

    Pixels are scaled to [0, 1] and flattened to 64 features; the split is shuffled with
    ``seed`` and stratified, so every class appears in both parts. No download is needed.
    """
    from sklearn.datasets import load_digits as sk_load_digits

    digits = sk_load_digits()
    X = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    return _split(X, y, test_fraction, seed)


def _require_fraction(test_fraction) -> float:
    if (isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float, np.floating))
            or not 0.0 < test_fraction < 1.0):
        raise ValueError(f"test_fraction must lie between 0 and 1, not {test_fraction!r}")
    return float(test_fraction)


def _split(X, y, test_fraction, seed) -> Split:
    test_fraction, seed = _require_fraction(test_fraction), require_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    test_idx = []
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        test_idx.extend(idx[: max(1, round(len(idx) * test_fraction))])
    test = np.zeros(len(y), dtype=bool)
    test[test_idx] = True
    train_idx = rng.permutation(np.flatnonzero(~test))
    test_idx = rng.permutation(np.flatnonzero(test))
    return Split(X[train_idx], y[train_idx], X[test_idx], y[test_idx])


# IDX: a big-endian header (two zero bytes, a type code, the number of dimensions), then one
# big-endian uint32 per dimension, then the data. MNIST ships images as ubyte 3-D arrays and
# labels as ubyte 1-D arrays, usually gzipped.
_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path) -> np.ndarray:
    """Read one IDX file (plain or .gz), e.g. MNIST's train-images-idx3-ubyte.gz."""
    path = _path(path, "path")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError; a cut-off .gz ends early
        raise ValueError(f"{path}: cannot be read as {'gzip' if opener is gzip.open else 'a file'} "
                         f"({type(err).__name__}: {err})") from err
    if len(raw) < 4:
        raise ValueError(f"{path}: too short to be an IDX file ({len(raw)} bytes)")
    zero, type_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0:
        raise ValueError(f"{path}: not an IDX file (the first two bytes must be zero)")
    if type_code not in _IDX_TYPES:
        raise ValueError(f"{path}: unknown IDX data type 0x{type_code:02X}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: header promises {ndim} dimensions but the file ends early")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_TYPES[type_code]
    expected = math.prod(shape) * dtype.itemsize  # Python integers: a header's product cannot overflow
    if len(raw) - header != expected:
        raise ValueError(
            f"{path}: shape {shape} of {dtype} needs {expected} data bytes, "
            f"the file has {len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _path(path, name: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise ValueError(f"{name} must be a file or folder name (str or pathlib.Path), not {type(path).__name__}")
    return Path(path)


def write_idx(path, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzipped if the name ends in .gz); the inverse of read_idx."""
    path = _path(path, "path")
    if not isinstance(array, np.ndarray):
        raise ValueError(f"array must be a NumPy array, not {type(array).__name__}")
    for code, idx_dtype in _IDX_TYPES.items():
        if (array.dtype.kind, array.dtype.itemsize) == (idx_dtype.kind, idx_dtype.itemsize):
            break
    else:
        raise ValueError(f"array: IDX cannot store dtype {array.dtype}")
    header = struct.pack(f">HBB{array.ndim}I", 0, code, array.ndim, *array.shape)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(header + array.astype(idx_dtype).tobytes())


def load_mnist(directory, test_fraction: float | None = None) -> Split:
    """MNIST from the four standard IDX files in ``directory`` (plain or .gz).

    Images become float32 rows of 784 pixels in [0, 1]. The official train/test split is
    used unless ``test_fraction`` asks for a fresh one.
    """
    directory = _path(directory, "directory")
    if test_fraction is not None:  # checked before any file is read
        _require_fraction(test_fraction)

    def find(stem):
        for name in (stem, stem + ".gz"):
            if (directory / name).exists():
                return directory / name
        raise FileNotFoundError(f"{stem}[.gz] not found in {directory}")

    def images(stem):
        arr = read_idx(find(stem))
        if arr.ndim != 3:
            raise ValueError(f"{stem}: images must be 3-D [n, rows, cols], got shape {arr.shape}")
        if arr.dtype != np.uint8:  # pixels / 255 lie in [0, 1] only for bytes
            raise ValueError(f"{stem}: images must be unsigned bytes (IDX type 0x08, pixels 0..255), not {arr.dtype}")
        if arr.shape[0] == 0:
            raise ValueError(f"{stem}: the file holds no images (shape {arr.shape})")
        return (arr.reshape(arr.shape[0], -1) / 255.0).astype(np.float32)

    def labels(stem):
        arr = read_idx(find(stem))
        if arr.ndim != 1:
            raise ValueError(f"{stem}: labels must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind not in "iu" or arr.size and not 0 <= int(arr.min()) <= int(arr.max()) <= 9:
            raise ValueError(f"{stem}: labels must be the digits 0..9, found {arr.dtype} values "
                             f"{arr.min() if arr.size else '-'}..{arr.max() if arr.size else '-'}")
        return arr.astype(np.int32)

    X_train, y_train = images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")
    X_test, y_test = images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte")
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError(f"t10k-images-idx3-ubyte: test images have {X_test.shape[1]} pixels but the training "
                         f"images {X_train.shape[1]}: they must be the same size")
    for X, y, part in ((X_train, y_train, "train"), (X_test, y_test, "test")):
        if len(X) != len(y):
            raise ValueError(f"MNIST {part}: {len(X)} images but {len(y)} labels")
    if test_fraction is None:
        return Split(X_train, y_train, X_test, y_test)
    return _split(np.concatenate([X_train, X_test]), np.concatenate([y_train, y_test]),
                  test_fraction, 0)
