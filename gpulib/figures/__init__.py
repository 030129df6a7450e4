"""Drawing: the book's figures and widgets, from stored results and from the kernels' NumPy models; nothing here measures."""
