"""16.6: the tools of the debugging playbook (profiler, recorder, memory estimator, roofline), above
the models they look at; nothing below imports them.
"""
