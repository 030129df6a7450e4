"""16.6 and 16.2: reductions as shared-memory trees (dW and db of the convolution, softmax's maximum and sum)."""
