"""The process a student's code runs in: ``python gpulib/grading/cleanroom/sandbox.py --dir D -- CMD...``
restricts itself, then becomes CMD (the worker, or the Jupyter kernel of the feedback run).

In force before CMD starts, and inherited by everything it starts:
- its own folder D as home, temporary folder and working folder, and an environment with
  nothing of the grader's in it (no NBGRADER_*, no JPY_*, no paths to the course);
- Landlock (Linux 5.13 and later): the process may read files but write only inside D
  (and /dev, /dev/shm), may not signal or trace processes outside its domain; where the kernel
  has no Landlock, a warning says so and the other protections stay;
- limits on CPU time, memory (on the simulator; CUDA reserves address space), file size, no
  core files;
- run as root (a grading server, CI), it becomes ``nobody`` (``GPULIB_CLEANROOM_USER``) when
  that user can run the interpreter and read the book's files, so the course's files and the
  gradebook are not its to change whatever the kernel supports; where it cannot (a Python under
  /root), it stays uid 0 with every capability dropped from its bounding set (no mounts, no raw
  devices, no signals to other users), Landlock keeping its writes.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "GPULIB_BACKEND", "GPULIB_GRADING_TIMEOUT", "CUDA_VISIBLE_DEVICES",
            "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
KEEP_PREFIXES = ("NUMBA_CUDA_", "OPENBLAS_", "MKL_")
USER_ENV = "GPULIB_CLEANROOM_USER"

# Landlock (include/uapi/linux/landlock.h)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_PR_SET_NO_NEW_PRIVS = 38
_O_PATH = getattr(os, "O_PATH", 0o10000000)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(abi), 0)


def restrict_writes(writable: list[str]) -> int:
    """Landlock: from now on this process and its children write only beneath ``writable``.
    Returns the ABI used (0: not available, nothing done)."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    fields = [handled, 0, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0]
    size = 8 * (3 if abi >= 6 else 2 if abi >= 4 else 1)
    attr = (ctypes.c_uint64 * 3)(*fields)
    ruleset = libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in writable:
            if not os.path.exists(path):
                continue
            fd = os.open(path, _O_PATH | os.O_CLOEXEC)
            try:
                allowed = handled if os.path.isdir(path) else (_WRITE_FILE | (_TRUNCATE if abi >= 3 else 0))
                rule = _PathBeneath(allowed, fd)
                if libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def target_user() -> str | None:
    """The user the sandbox becomes: ``nobody`` when the grader runs as root, else none (the
    grader's own user, with Landlock). ``GPULIB_CLEANROOM_USER=`` (empty) keeps root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    name = os.environ.get(USER_ENV, "nobody")
    if name:
        import pwd

        try:
            pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"{USER_ENV} must name a user of this machine (or be empty: stay root), not {name!r}") from None
    return name or None


def environment(folder: str, source: dict | None = None) -> dict:
    """The sandbox's environment: the few variables kernels need, everything else left behind."""
    source = os.environ if source is None else source
    env = {k: v for k, v in source.items() if k in KEEP_ENV or k.startswith(KEEP_PREFIXES)}
    for key in ("HOME", "TMPDIR", "MPLCONFIGDIR", "NUMBA_CACHE_DIR", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR",
                "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"):
        env[key] = folder
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    return env


LATE_LANDLOCK = "GPULIB_CLEANROOM_LANDLOCK"


def writable(folder: str) -> list[str]:
    """What a sandbox may write: its folder, and the devices a kernel launch opens."""
    return [folder, "/dev/null", "/dev/zero", "/dev/shm"] + [os.path.join("/dev", n) for n in os.listdir("/dev")
                                                          if n.startswith("nvidia")]


def restrict_late() -> int:
    """For a process started with ``landlock=False`` (a GPU worker): Landlock now, after the CUDA
    driver is initialised (measured on an H200: a process that execs under Landlock gets
    CUDA_ERROR_OPERATING_SYSTEM from cuInit; one that restricts itself after cuInit runs)."""
    folder = os.environ.pop(LATE_LANDLOCK, "")
    return restrict_writes(writable(folder)) if folder else 0


def command(folder: str, argv: list[str], cpu_s: int = 1800, memory: int = 0, landlock: bool = True) -> list[str]:
    """The command line that runs ``argv`` inside a sandbox rooted at ``folder``. With
    ``landlock=False`` the program must call ``restrict_late()`` itself before it runs a
    student's code (the worker does, after it initialises the GPU)."""
    # run by path, not with -m: the sandbox imports nothing of gpulib (nor numba) before it restricts itself
    return [sys.executable, os.path.abspath(__file__), "--dir", folder, "--cpu", str(cpu_s),
            "--memory", str(memory), "--landlock", "1" if landlock else "0", "--", *argv]


def _readable_by_others(path: str) -> bool:
    """Every folder on the way to ``path`` searchable by others, and ``path`` readable (and
    runnable, for a file) by them: what another user needs to run the interpreter and import."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        if not os.stat(os.sep.join(parts[:i])).st_mode & 0o001:
            return False
    mode = os.stat(path).st_mode
    return bool(mode & 0o004) and (os.path.isdir(path) or bool(mode & 0o001)) if os.path.isfile(path) else bool(mode & 0o005)


def _drop_capabilities() -> None:
    """Empty the capability bounding set: whatever this process runs gets no capability."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; fails quietly past the last capability


def _limit(which, value):
    soft, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))


def _own(folder: str, uid: int, gid: int):
    for root, dirs, files in os.walk(folder):
        for name in [root] + [os.path.join(root, n) for n in dirs + files]:
            os.chown(name, uid, gid)


def enter(folder: str, argv: list[str], cpu_s: int, memory: int, landlock: bool = True) -> list[str]:
    """Restrict this process (see the module docstring); returns ``argv`` with a Jupyter
    connection file (``-f PATH``) copied into ``folder`` where the new user could not read it."""
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    user = target_user()
    argv = list(argv)
    if user and "-f" in argv[:-1]:
        i = argv.index("-f") + 1
        copy = os.path.join(folder, "kernel-connection.json")
        with open(argv[i], "rb") as src, open(copy, "wb") as dst:
            dst.write(src.read())
        argv[i] = copy
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_FSIZE, 1 << 30)
    if cpu_s > 0:
        _limit(resource.RLIMIT_CPU, cpu_s)
    if memory > 0:
        _limit(resource.RLIMIT_AS, memory)
    env = environment(folder)
    os.chdir(folder)
    if user:
        here = os.path.dirname(os.path.abspath(__file__))
        if not all(_readable_by_others(p) for p in (argv[0] if os.sep in argv[0] else sys.executable, here)):
            print(f"gpulib clean room: {user} cannot run this Python or read the book's files; the sandbox stays "
                  f"uid 0 without capabilities", file=sys.stderr)
            user = None
    if landlock:
        abi = restrict_writes(writable(folder))
    else:
        abi = landlock_abi()
        env[LATE_LANDLOCK] = folder
    if not abi:
        print("gpulib clean room: this kernel has no Landlock; the sandbox cannot keep its writes to its "
              "own folder (run the grader as root to run it as another user)", file=sys.stderr)
    if not user and hasattr(os, "geteuid") and os.geteuid() == 0:
        _drop_capabilities()  # root stays root (GPULIB_CLEANROOM_USER=, or nobody cannot run this Python): no capabilities
    if user:
        import pwd

        entry = pwd.getpwnam(user)
        _own(folder, entry.pw_uid, entry.pw_gid)
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        env["USER"] = env["LOGNAME"] = user
    os.environ.clear()
    os.environ.update(env)
    return argv


def main(args: list[str]) -> None:
    if "--" not in args:
        raise SystemExit("usage: python sandbox.py --dir D [--cpu S] [--memory B] -- CMD...")
    split = args.index("--")
    options, argv = args[:split], args[split + 1:]
    opts = dict(zip(options[::2], options[1::2]))
    argv = enter(opts["--dir"], argv, int(opts.get("--cpu", 1800)), int(opts.get("--memory", 0)),
                 opts.get("--landlock", "1") == "1")
    os.execvpe(argv[0], argv, os.environ)


if __name__ == "__main__":
    main(sys.argv[1:])
