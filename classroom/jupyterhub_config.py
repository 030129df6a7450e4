"""The class's JupyterHub: one instructor and the students, each a Unix account of its own, each
with a Jupyter server of its own that runs as that account (JupyterHub's local process spawner),
behind configurable-http-proxy. nbgrader's exchange is a folder every account can reach.

`make hub-test` starts it (classroom/test_hub_round.py) with the values below taken from the
environment; a course's own hub sets them directly (assignments/README.md, "On a JupyterHub").

    HUB_PREFIX       the Python environment every account's server runs in (make hub-test: a venv
                     of the system's Python, readable by every account)
    HUB_STATE        the hub's own files (database, cookie secret, proxy token)
    HUB_PORT         the public port (the proxy), on 127.0.0.1; the hub itself listens on HUB_PORT + 1
    HUB_PASSWORD     the accounts' shared password (a real course uses PAM or its university's login)
    HUB_SERVICE_TOKEN  the token of the service that drives the round (the test)
    HUB_USERS        the accounts, instructor first, separated by spaces
"""

import os

c = get_config()  # noqa: F821  (JupyterHub provides it)

prefix = os.environ["HUB_PREFIX"]
state = os.environ["HUB_STATE"]
port = int(os.environ["HUB_PORT"])
instructor, *students = os.environ["HUB_USERS"].split()
here = os.path.dirname(os.path.abspath(__file__))

c.JupyterHub.bind_url = f"http://127.0.0.1:{port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = port + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 2}"
c.ConfigurableHTTPProxy.command = [os.path.join(here, "node_modules", ".bin", "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{os.path.join(state, 'jupyterhub.sqlite')}"
c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(state, "jupyterhub.pid")

# Accounts: a shared password here; the Unix account of each name must exist (the spawner becomes it).
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ["HUB_PASSWORD"]
c.Authenticator.allowed_users = set(students)
c.Authenticator.admin_users = {instructor}

# Each account's server: the shared environment's Jupyter, as that account, in its home folder.
c.Spawner.cmd = [os.path.join(prefix, "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {"PATH": f"{os.path.join(prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin"}
if "GPULIB_BACKEND" in os.environ:  # the test's hub: the simulator, whatever the machine has
    c.Spawner.environment["GPULIB_BACKEND"] = os.environ["GPULIB_BACKEND"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

# The service that drives the round: it adds the accounts, starts and stops their servers and
# issues each account a token of its own, whose rights are that account's (the test then acts as
# each person through the proxy, as their browser would).
c.JupyterHub.services = [{"name": "round", "api_token": os.environ["HUB_SERVICE_TOKEN"]}]
c.JupyterHub.load_roles = [{"name": "round", "services": ["round"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "list:users"]}]
