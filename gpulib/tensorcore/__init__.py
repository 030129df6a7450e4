"""16.5: the tensor cores' instructions from Numba (WMMA, wgmma, TMA through inline PTX on a GPU,
emulated on the simulator) and NumPy models of their layouts. What must stay true: instructions
only; the GEMMs and convolutions built on them live with their operation (gemm/, conv/).
"""
