"""16.5: cuDNN's own candidates for one convolution, through the cuDNN frontend's Python API
(the ``nvidia-cudnn-frontend`` package, imported as ``cudnn``), when it is installed.

``torch.backends.cudnn.benchmark = True`` times cuDNN's candidates and keeps the fastest, but
shows none of them. The frontend asks cuDNN's heuristics for every execution plan ("engine
configuration") that supports the layer, and can run each one: ``engines`` builds them all,
checks each output against float64, times the ones that pass (CUDA events, median) and
returns them fastest first with cuDNN's name for each and the workspace it needs. It is the
same job as ``gpulib.conv.autotune.find_algorithms``, done by cuDNN on its own kernels.
"""

from __future__ import annotations

import numpy as np

from gpulib.env import on_gpu
from gpulib.timing import benchmark

# the numerical notes that say which algorithm an engine uses (cudnnBackendNumericalNote_t)
NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "FFT", "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6",
         "WINOGRAD_TILE_13x13")


def available() -> str:
    """The cuDNN version the frontend talks to, or "" if the frontend or a GPU is missing."""
    if not on_gpu():
        return ""
    try:
        import cudnn
        import torch  # noqa: F401  (loads the cuDNN library the frontend uses)
    except ImportError:
        return ""
    return cudnn.backend_version_string()


def engines(X, W, padding: int, stride: int, half: bool = True, repeat: int = 10) -> list[dict]:
    """Every execution plan cuDNN offers for conv(X, W) (NCHW arrays, run channels_last in fp16,
    or NCHW in fp32 with ``half=False``): name, workspace bytes, status, ms, relative error and the
    plan's numerical notes (``NOTES``: which say FFT, Winograd and its tile, tensor cores)."""
    import cudnn
    import torch
    import torch.nn.functional as F

    dtype = torch.float16 if half else torch.float32
    io_type = cudnn.data_type.HALF if half else cudnn.data_type.FLOAT
    fmt = torch.channels_last if half else torch.contiguous_format
    x = torch.as_tensor(X, device="cuda").to(dtype).to(memory_format=fmt)
    w = torch.as_tensor(W, device="cuda").to(dtype).to(memory_format=fmt)
    want = F.conv2d(x.double(), w.double(), padding=padding, stride=stride)
    scale = float(F.conv2d(x.double().abs(), w.double().abs(), padding=padding, stride=stride).max())
    y = torch.empty(want.shape, device="cuda", dtype=dtype).to(memory_format=fmt)

    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)

    def planned_graph():
        """The convolution as a cuDNN graph with every plan the heuristics offer (not yet built);
        the frontend plans a graph once, so each note filter below takes a fresh one."""
        graph = cudnn.pygraph(io_data_type=io_type, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)
        tx = graph.tensor(name="X", dim=list(x.size()), stride=list(x.stride()), data_type=io_type)
        tw = graph.tensor(name="W", dim=list(w.size()), stride=list(w.stride()), data_type=io_type)
        ty = graph.conv_fprop(image=tx, weight=tw, padding=[padding, padding], stride=[stride, stride],
                              dilation=[1, 1])
        ty.set_output(True).set_data_type(io_type).set_stride(list(y.stride()))
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        return graph, tx, tw, ty

    graph, tx, tw, ty = planned_graph()
    notes = plan_notes(planned_graph, cudnn)
    graph.check_support()
    graph.build_plans(cudnn.build_plan_policy.ALL)

    rows = []
    for i in range(graph.get_execution_plan_count()):
        name = str(graph.get_plan_name_at_index(i))
        row = dict(index=i, name=name, status="ok", ms=None, rel_err=None, notes=notes.get(name, []),
                   workspace_bytes=int(graph.get_workspace_size_plan_at_index(i)))
        workspace = torch.empty(max(row["workspace_bytes"], 1), device="cuda", dtype=torch.uint8)
        pack = {tx: x, tw: w, ty: y}
        try:
            y.fill_(float("nan"))
            graph.execute_plan_at_index(pack, workspace, i, handle=handle)
            torch.cuda.synchronize()
        except Exception as e:  # a plan that cannot run is listed, never timed
            row["status"] = f"failed: {str(e).splitlines()[0][:80]}"
            rows.append(row)
            continue
        err = (y.double() - want).abs().max().item() / scale
        row["rel_err"] = err
        if not np.isfinite(err) or err > (2e-3 if half else 1e-5):
            row["status"] = "wrong result"
        else:
            run = lambda: graph.execute_plan_at_index(pack, workspace, i, handle=handle)  # noqa: E731
            row["ms"] = benchmark(run, repeat=repeat, label=row["name"]).median_ms
        rows.append(row)
    return sorted(rows, key=lambda r: (r["ms"] is None, r["ms"] or 0.0))


def plan_notes(planned_graph, cudnn) -> dict[str, list[str]]:
    """Each plan's numerical notes (``NOTES``), by plan name. The frontend does not list a plan's
    numerical notes, but it can bar the plans that carry one (``deselect_numeric_notes``), and a
    barred plan refuses to build: a plan that refuses on a fresh graph with one note deselected
    carries that note. A frontend without a note or a filter leaves the plans without it."""
    notes: dict[str, list[str]] = {}
    for note in NOTES:
        if not hasattr(cudnn.numerical_note, note):
            continue
        graph = planned_graph()[0]
        graph.deselect_numeric_notes([getattr(cudnn.numerical_note, note)])
        for i in range(graph.get_execution_plan_count()):
            name = str(graph.get_plan_name_at_index(i))
            notes.setdefault(name, [])
            try:
                graph.build_plan_at_index(i)
            except Exception as e:  # barred by the filter, or a plan that cannot build at all
                message = str(e)
                if ("Deselecting execution plan" in message and "with name" not in message) or "note filter" in message:
                    notes[name].append(note)
    return notes


def table(rows: list[dict]) -> str:
    lines = [f"  {'plan (cuDNN engine and knobs)':<52} {'ms':>8} {'workspace MB':>12} {'rel err':>8}  status, notes"]
    for r in rows:
        ms = f"{r['ms']:8.3f}" if r["ms"] is not None else f"{'-':>8}"
        err = f"{r['rel_err']:8.1e}" if r["rel_err"] is not None else f"{'-':>8}"
        notes = f", {'+'.join(r['notes'])}" if r.get("notes") else ""
        lines.append(f"  {r['name'][:52]:<52} {ms} {r['workspace_bytes'] / 1e6:12.2f} {err}  {r['status']}{notes}")
    return "\n".join(lines)
