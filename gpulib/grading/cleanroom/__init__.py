"""The clean room: grades computed in a process the student's code never ran in.

    judge.py      the trusted side: runs the instructor's checks on proxies of the student's
                  kernels and functions, reads the verdicts; ``grade_notebook``
    worker.py     the untrusted side: runs the screened solution cells in a sandbox and does
                  only what the judge asks (launch, trace, call), answering with data
    compile.py    compiles each kernel for compute capability 9.0 (NVVM, no GPU needed)
    screen.py     the AST screen every solution cell passes before it runs
    sandbox.py    the process the worker runs in: own folder, scrubbed environment, limits,
                  Landlock (writes only inside its folder), another user when run as root
    channel.py    the messages between the two, read by the judge with a whitelist unpickler
    nbgrader.py   the autograde preprocessors that put the clean room's verdicts in the gradebook

What must stay true: the judge never executes a student's source and never unpickles anything
outside ``channel.SAFE``; everything the worker sends is the student's answer, checked by the judge.
"""
