"""The clean room: grades computed in a process the student's code never ran in (the judge), on
proxies of what a sandboxed worker ran.

What must stay true: the judge never executes a student's source and never unpickles anything
outside ``channel.SAFE``; everything the worker sends is the student's answer, checked by the judge.
"""
