"""nbgrader's autograde with the clean room: what ``assignments/nbgrader_config.py`` installs.

``CleanRoomExecute`` takes the place of nbgrader's ``Execute`` in ``Autograde.autograde_preprocessors``:
1. it runs the submission as nbgrader does, for the student's feedback, but its Jupyter kernel
   starts inside a sandbox (``sandbox.py``: its own folder, Landlock, limits), so nothing the
   notebook does can touch the course's files or the gradebook, during the run or after it;
2. then it grades the solution cells in the clean room (``judge.grade_notebook``, with the setup
   and the checks of the instructor's source notebook) and writes each test cell's outputs
   from that verdict: an error output for a failed check (0 points), the check's report for a
   passed one, and a number for a partly earned one (nbgrader's partial credit).

``SaveAutoGrades`` then records exactly those outputs: the scores in the gradebook are the clean
room's, whatever the notebook's own run printed.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from traitlets import Bool

from gpulib.grading.cleanroom import judge, sandbox


class SandboxedKernelManager(AsyncKernelManager):
    """A Jupyter kernel started inside a sandbox of its own."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        self._sandbox_folder = tempfile.mkdtemp(prefix="gpulib-cleanroom-kernel-")
        os.chmod(self._sandbox_folder, 0o755)
        from gpulib.env import on_gpu

        # Landlock breaks the CUDA driver of a process started under it (sandbox.restrict_late):
        # on a GPU the feedback kernel is kept from the course's files by its user (nobody) alone
        return sandbox.command(self._sandbox_folder, cmd, judge.CPU_LIMIT, 0, landlock=not on_gpu())

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        folder = getattr(self, "_sandbox_folder", None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def _outputs(verdict: judge.Verdict, points: float) -> list:
    outputs = []
    if verdict.stdout:
        outputs.append(NotebookNode(output_type="stream", name="stdout", text=verdict.stdout))
    if not verdict.passed:
        lines = [f"채점실(clean room)의 판정: {verdict.message}"] + [line.rstrip("\n") for line in verdict.traceback]
        outputs.append(NotebookNode(output_type="error", ename=f"Mistake[{verdict.kind}]", evalue=verdict.message,
                                    traceback=lines))
    elif verdict.score is not None:  # the points a speed check gave
        earned = max(0.0, min(float(points), verdict.score))
        outputs.append(NotebookNode(output_type="execute_result", execution_count=None, metadata={},
                                    data={"text/plain": f"{earned:g}"}))
    return outputs


class CleanRoomExecute(Execute):
    """nbgrader's Execute, sandboxed, followed by the clean room's verdicts (module docstring)."""

    feedback_run = Bool(True, help="Run the submission for the student's feedback before the clean room grades it; "
                                   "without it the test cells show the clean room's verdicts only (the scores are the "
                                   "same either way: they never come from the submission's own run)").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager
        super().__init__(*args, **kwargs)

    def _source_notebook(self, resources) -> dict:
        info = resources["nbgrader"]
        course = CourseDirectory(config=self.config)
        folder = course.format_path(course.source_directory, ".", info["assignment"])
        return nbformat.read(os.path.join(folder, f"{info['notebook']}.ipynb"), as_version=4)

    def preprocess(self, nb, resources=None, km=None):
        if self.feedback_run:
            nb, resources = super().preprocess(nb, resources, km=km)
        source = self._source_notebook(resources)
        verdicts = judge.grade_notebook(nb, source)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                verdict = verdicts.get(meta.get("grade_id")) or judge.Verdict(meta.get("grade_id"), False, "missing",
                                                                              "원본 노트북에 없는 검사 셀이다")
                cell.outputs = _outputs(verdict, float(meta.get("points", 0)))
        self.log.info("clean room: %d checks graded in %.1f s", len(verdicts), judge.grade_notebook.last_seconds)
        return nb, resources
