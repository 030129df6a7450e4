"""A whole class round on a real JupyterHub (make hub-test; run as root, since the hub starts each
account's server as that account).

An instructor and three students, each a Unix account and a hub user of its own, each with a
Jupyter server of its own behind configurable-http-proxy; nbgrader's exchange between them.
Everything a person does goes through the proxy with that person's own token, as their browser
would: the instructor generates and releases assignment 16_1 in the formgrader; each student
lists it, fetches it, writes an answer into the notebook (one solves it, one answers problem 3
with an unstable softmax, one cheats: an extra cell patches every check and starts a thread that
tries to rewrite the gradebook, while problem 1 is answered wrong) and submits; the instructor
collects, autogrades each submission in the clean room, generates and releases the feedback; the
students fetch their feedback; the instructor exports the grades. The points the gradebook
records are the ones each answer earns, and nothing the cheat wrote landed.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the assignments' own test helpers
from test_assignments_nbgrader import add_cheat_cell  # noqa: E402
from test_cleanroom import solution_source  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PREFIX = Path(os.environ.get("HUB_PREFIX", "/opt/gpulib-hub"))
COURSE_ID = "deep-learning-cuda"
ASSIGNMENT = "16_1_mlp"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
INSTRUCTOR = "dlcuda-instructor"
STUDENTS = {"dlcuda-student1": "solves", "dlcuda-student2": "unstable softmax", "dlcuda-student3": "cheats"}
MARK = "deep learning and CUDA class round (make hub-test)"  # the accounts' GECOS: ours to reset

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the hub starts each account's server as that account: run as root")


def _free_port() -> int:
    """A port p with p, p + 1 and p + 2 free (the proxy, the hub, the proxy's API)."""
    for _ in range(50):
        base = secrets.randbelow(20000) + 30000
        try:
            for p in range(base, base + 3):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no three free ports in a row")


def _account(name: str) -> Path:
    """The Unix account `name` with an empty home: made if missing, reset if it is one of ours,
    refused if someone else's."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", MARK, name], check=True)
        entry = pwd.getpwnam(name)
    if entry.pw_gecos != MARK:
        pytest.fail(f"an account named {name} exists and is not the round's own ({entry.pw_gecos!r}): not touching it")
    home = Path(entry.pw_dir)
    subprocess.run(["pkill", "-u", name], check=False)  # a server left by an earlier round
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return home


def _as(name: str, path: Path, text: str) -> None:
    """Writes a file owned by account `name` (its folders too)."""
    entry = pwd.getpwnam(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    for p in [path, *path.parents]:
        if p == Path(entry.pw_dir).parent:
            break
        os.chown(p, entry.pw_uid, entry.pw_gid)


class Person:
    """Someone using the hub through the proxy with their own token."""

    def __init__(self, hub: "Hub", name: str, token: str):
        self.hub, self.name, self.token = hub, name, token

    def call(self, method: str, path: str, **kw) -> requests.Response:
        url = f"{self.hub.url}/user/{self.name}/{path.lstrip('/')}"
        r = requests.request(method, url, headers={"Authorization": f"token {self.token}"}, timeout=900, **kw)
        assert r.ok, f"{self.name}: {method} {path}: {r.status_code} {r.text[:2000]}"
        return r

    def nbgrader(self, action: str) -> dict:
        """A student's button in the Assignments tab: fetch, submit or fetch_feedback."""
        r = self.call("POST", f"assignments/{action}", data={"assignment_id": ASSIGNMENT, "course_id": COURSE_ID})
        return r.json()

    def formgrader(self, path: str) -> object:
        """The instructor's formgrader: POST to its API (generate, release, collect, autograde...)."""
        result = self.call("POST", f"formgrader/api/{path}").json()
        assert not isinstance(result, dict) or result.get("success", True), f"formgrader {path}: {result}"
        return result

    def read(self, path: str) -> dict:
        return self.call("GET", f"api/contents/{path}").json()


class Hub:
    def __init__(self, state: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.service = secrets.token_hex(32)
        env = dict(os.environ, HUB_PREFIX=str(PREFIX), HUB_STATE=str(state), HUB_PORT=str(self.port),
                   HUB_PASSWORD=secrets.token_hex(16), HUB_SERVICE_TOKEN=self.service,
                   HUB_USERS=" ".join([INSTRUCTOR, *STUDENTS]), GPULIB_BACKEND="sim")
        self.log = state / "jupyterhub.log"
        self.process = subprocess.Popen([str(PREFIX / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
                                        cwd=state, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        self._wait(lambda: requests.get(f"{self.url}/hub/api", timeout=5).ok, 90, "the hub to answer")

    def _wait(self, ready, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the hub exited:\n{self.log.read_text()[-4000:]}"
            try:
                if ready():
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError(f"waited {seconds} s for {what}:\n{self.log.read_text()[-4000:]}")

    def api(self, method: str, path: str, **kw) -> requests.Response:
        r = requests.request(method, f"{self.url}/hub/api/{path}", headers={"Authorization": f"token {self.service}"},
                             timeout=60, **kw)
        assert r.ok, f"hub API {method} {path}: {r.status_code} {r.text[:2000]}"
        return r

    def log_in(self, name: str) -> Person:
        """A token of the account's own, and its server started (as that Unix account)."""
        token = self.api("POST", f"users/{name}/tokens", json={"note": "class round", "expires_in": 3600}).json()["token"]
        self.api("POST", f"users/{name}/server")
        self._wait(lambda: self.api("GET", f"users/{name}").json()["servers"].get("", {}).get("ready"), 150,
                   f"{name}'s server")
        return Person(self, name, token)

    def stop(self) -> None:
        for name in [INSTRUCTOR, *STUDENTS]:
            try:
                self.api("DELETE", f"users/{name}/server")
            except Exception:
                pass
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    homes = {name: _account(name) for name in [INSTRUCTOR, *STUDENTS]}
    # The exchange: one folder every account can write to (nbgrader's default layout).
    exchange = PREFIX / "exchange"
    shutil.rmtree(exchange, ignore_errors=True)
    exchange.mkdir(parents=True)
    exchange.chmod(0o777)
    # Settings every account's nbgrader reads (the environment's own etc/jupyter).
    (PREFIX / "etc" / "jupyter").mkdir(parents=True, exist_ok=True)
    (PREFIX / "etc" / "jupyter" / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n")
    # The instructor's course folder: the course's configuration (the clean room) and its source.
    course = homes[INSTRUCTOR] / "course"
    _as(INSTRUCTOR, course / "nbgrader_config.py", (ROOT / "assignments" / "nbgrader_config.py").read_text())
    source = (ROOT / "assignments" / "source" / ASSIGNMENT / NOTEBOOK).read_text()
    _as(INSTRUCTOR, course / "source" / ASSIGNMENT / NOTEBOOK, source)
    _as(
        INSTRUCTOR,
        homes[INSTRUCTOR] / ".jupyter" / "nbgrader_config.py",
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n",
    )  # nbgrader then reads the course's own
    state = tmp_path_factory.mktemp("hub")
    hub = Hub(state)
    yield hub, homes
    hub.stop()


def _text(source) -> str:
    """A cell's source as one string (a notebook file may hold it as a list of lines)."""
    return source if isinstance(source, str) else "".join(source)


def _answer(released: dict, kind: str, marker: Path) -> dict:
    """The released notebook with a student's answer in each solution cell: the instructor's
    solution, or with one of the mistakes of `kind` (and for the cheat, the cheating cell of
    tests/test_assignments_nbgrader.py)."""
    nb = json.loads(json.dumps(released))
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            text = solution_source(ASSIGNMENT, cell["metadata"]["nbgrader"]["grade_id"])
            if kind == "unstable softmax":
                text = text.replace("            m = max(m, Z[n, c])", "            m = 0.0")
            if kind == "cheats":
                text = text.replace("Y[n, j] = max(acc, 0.0)", "Y[n, j] = acc")
            cell["source"] = text
    if kind == "cheats":
        add_cheat_cell(nb["cells"], marker, Path(pwd.getpwnam(INSTRUCTOR).pw_dir) / "course" / "gradebook.db")
    return nb


def test_a_class_round_from_release_to_exported_grades(hub):
    from nbgrader.api import Gradebook

    hub, homes = hub
    course = homes[INSTRUCTOR] / "course"
    marker = course / "CHEATED"

    # The instructor: generate the student version and release it to the exchange.
    teacher = hub.log_in(INSTRUCTOR)
    teacher.formgrader(f"assignment/{ASSIGNMENT}/assign")
    teacher.formgrader(f"assignment/{ASSIGNMENT}/release")
    released = json.loads((course / "release" / ASSIGNMENT / NOTEBOOK).read_text())
    assert "BEGIN SOLUTION" not in json.dumps(released) and "hidden=True" not in json.dumps(released)

    # Each student: list, fetch, answer, submit.
    students = {name: hub.log_in(name) for name in STUDENTS}
    for name, student in students.items():
        listed = student.call("GET", "assignments", params={"course_id": COURSE_ID}).json()
        assert listed["success"] and [a["status"] for a in listed["value"]] == ["released"], listed
        fetched = student.nbgrader("fetch")
        assert [a["status"] for a in fetched["value"]] == ["fetched"], fetched
        path = f"{ASSIGNMENT}/{NOTEBOOK}"
        model = student.read(path)
        assert [_text(c["source"]) for c in model["content"]["cells"]] == [_text(c["source"]) for c in released["cells"]]
        answer = _answer(model["content"], STUDENTS[name], marker)
        student.call("PUT", f"api/contents/{path}", json={"type": "notebook", "content": answer})
        submitted = student.nbgrader("submit")
        assert any(a["status"] == "submitted" for a in submitted["value"]), submitted
        owner = pwd.getpwuid((homes[name] / ASSIGNMENT / NOTEBOOK).stat().st_uid).pw_name
        assert owner == name  # written by the student's own server, as the student's account

    # The instructor: collect, autograde each submission (the clean room), feedback.
    teacher.formgrader(f"assignment/{ASSIGNMENT}/collect")
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(STUDENTS)
    for name in STUDENTS:
        teacher.formgrader(f"submission/{ASSIGNMENT}/{name}/autograde")
    teacher.formgrader(f"assignment/{ASSIGNMENT}/generate_feedback")
    teacher.formgrader(f"assignment/{ASSIGNMENT}/release_feedback")

    # The points: the gradebook the formgrader wrote, test cell by test cell.
    source = json.loads((ROOT / "assignments" / "source" / ASSIGNMENT / NOTEBOOK).read_text())
    points = {
        c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
        for c in source["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
    }
    lost = {
        "solves": set(),
        "unstable softmax": {"check_softmax_xent", "hidden_softmax_xent"},
        "cheats": {"check_dense_forward", "hidden_dense_forward"},
    }
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for name, kind in STUDENTS.items():
            scores = {g: gb.find_grade(g, NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, name).score for g in points}
            expected = {g: 0 if g in lost[kind] else p for g, p in points.items()}
            assert scores == expected, (name, kind, scores)
    assert not marker.exists()  # the cheat's thread wrote nothing outside its sandbox

    # Each student: fetch the feedback, which is the graded notebook as a page.
    for name, student in students.items():
        student.nbgrader("fetch_feedback")
        folders = student.read(f"{ASSIGNMENT}/feedback")["content"]
        assert len(folders) == 1, folders
        page = student.call("GET", f"files/{folders[0]['path']}/{ASSIGNMENT}.html").content.decode()
        verdicts = page.count("채점실(clean room)의 판정")  # a failed check's verdict, in the page
        assert page.lstrip().lower().startswith("<!doctype html") and verdicts == (0 if STUDENTS[name] == "solves" else 2), (
            name,
            verdicts,
        )

    # The instructor: export the grades (in the instructor's terminal, as the instructor).
    entry = pwd.getpwnam(INSTRUCTOR)
    env = {"HOME": entry.pw_dir, "USER": INSTRUCTOR, "PATH": f"{PREFIX / 'bin'}:/usr/bin:/bin"}
    subprocess.run(
        [
            "runuser",
            "-u",
            INSTRUCTOR,
            "--",
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            "nbgrader",
            "export",
            "--to",
            "grades.csv",
        ],
        cwd=course,
        check=True,
        capture_output=True,
    )
    with open(course / "grades.csv") as f:
        grades = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    total = sum(points.values())
    assert grades == {name: total - sum(points[g] for g in lost[kind]) for name, kind in STUDENTS.items()}, grades
