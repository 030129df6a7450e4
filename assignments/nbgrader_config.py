"""nbgrader's configuration for the book's assignments (run nbgrader from this folder).

    source/<assignment>/<notebook>.ipynb    the instructor's notebooks: solutions and hidden tests
    release/                                student versions   (make assignments; not committed)
    solution/                               solution versions  (make assignments; not committed)
    submitted/, autograded/, feedback/      made by collect, autograde, generate_feedback

See README.md here for the whole cycle.
"""

import os

c = get_config()  # noqa: F821  (nbgrader provides it)

c.CourseDirectory.course_id = os.environ.get("NBGRADER_COURSE_ID", "deep-learning-cuda")
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))

# The text that replaces "### BEGIN SOLUTION ... ### END SOLUTION" in the student version.
c.ClearSolutions.code_stub = {"python": "# 여기에 코드를 쓰세요\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "여기에 답을 쓰세요"

# Time limits. Every check stops a simulator kernel that runs longer than 60 s by itself
# (gpulib.grading.core.TIMEOUT_S) and reports it; a cell gets this long in all before nbgrader
# interrupts it, records a CellTimeoutError for it (0 points) and goes on with the next cell.
# A check cell runs a few launches on the CUDA simulator: 5 to 40 s on one CPU core.
c.Execute.timeout = int(os.environ.get("NBGRADER_CELL_TIMEOUT", 300))
c.Execute.interrupt_on_timeout = True

# Grading in the clean room (gpulib/grading/cleanroom): the submission runs in a sandboxed kernel
# for the student's feedback, then every check is computed again in the grader's own process on
# the solution cells alone, and those verdicts are the points nbgrader records. Execute is
# replaced; the rest of nbgrader's autograde pipeline stays as it is.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades  # noqa: E402

from gpulib.grading.cleanroom.nbgrader import CleanRoomExecute  # noqa: E402

c.Autograde.autograde_preprocessors = [CleanRoomExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]

# The exchange (JupyterHub with a shared directory): see README.md.
if "NBGRADER_EXCHANGE" in os.environ:
    c.Exchange.root = os.environ["NBGRADER_EXCHANGE"]
