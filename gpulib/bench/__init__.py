"""Measuring: how fast the book's kernels run next to the library a user would pick instead, one
module per section, each with ``measure`` (GPU only), ``table``, ``load`` / ``save`` and a
script of the same name in benchmarks/. No kernel is defined and nothing is drawn here (figures/).
"""
