"""16.6's correctness playbook on a GPU: every planted bug of gpulib.playbook.correctness run
under its tool (compute-sanitizer's memcheck, racecheck and synccheck; CUDA_LAUNCH_BLOCKING;
Nsight Systems; torch.cuda.memory_summary), the reports stored with the device and date so that
a reader without a GPU sees what the tools said."""

from __future__ import annotations

from gpulib.bench import measure as measuring
from gpulib.playbook import correctness

RESULTS = measuring.RESULTS_DIR / "correctness.json"


def measure(repeat: int = 1, progress=print) -> dict:
    measuring.require_gpu()
    reports = {}
    for name in correctness.PROGRAMS:
        progress(f"{name} ...")
        try:
            reports[name] = correctness.run(name)
        except Exception as e:  # one tool failing must not lose the others' reports
            reports[name] = dict(name=name, tool=correctness.PROGRAMS[name][0], bug=correctness.PROGRAMS[name][1],
                                 command="", report=f"could not run: {type(e).__name__}: {e}")
    return dict(measuring.header(repeat), timing="not timed: tool reports", reports=reports)


def report_text(r: dict) -> str:
    """One tool's report as the notebook prints it."""
    lines = [f"[{r['name']}] bug: {r['bug']}", f"$ {r['command']}" if r.get("command") else "", r["report"]]
    if "report_blocking" in r:
        lines += ["$ CUDA_LAUNCH_BLOCKING=1 python planted.py", r["report_blocking"]]
    return "\n".join(line for line in lines if line)


def table(results: dict) -> str:
    return "\n\n".join([f"{results['device']}, {results['date']}"]
                       + [report_text(r) for r in results["reports"].values()])


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)
