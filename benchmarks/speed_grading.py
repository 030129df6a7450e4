"""The speed-graded exercises: the clean room's points for the instructor's solution and for slower correct solutions.

    python benchmarks/speed_grading.py [--save]   (--save writes benchmarks/results/speed_grading.json)

Each solution is graded as nbgrader's autograde grades it (the clean room), against the
instructor's reference kernel timed in the same run. The work is in gpulib/bench/speed_grading.py.
Needs a GPU.
"""

import sys

from _cli import main

from gpulib.bench import speed_grading as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
