"""16.3-16.5: the convolution algorithms, one module per algorithm, the registry of them, the
auto-tuner and the front door (front.py). Every convolution takes ``(X, W, b=None, padding=0,
stride=1, *, out=None)`` and returns Y [N, K, H', W'] on the device. Nothing is imported here:
import the module you need.
"""
