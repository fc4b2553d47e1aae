"""A stand-in Kubernetes API server on loopback for the Kubeflow launcher's tests: it answers the
REST calls the launcher makes (namespaces, ClusterTrainingRuntimes, ConfigMaps, Secrets,
TrainJobs, pods, logs) from an in-memory store and records every request, so a test sees exactly
what would reach a cluster. Tests set ``namespaces``, ``runtimes``, a TrainJob's ``status`` and
``pods`` and ``refuse`` (kind -> (code, message)) to play the cluster's part; a kube config file
points the client here."""

from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PATH = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?(?:/(?P<kind>[^/?]+)(?:/(?P<name>[^/?]+))?(?:/(?P<sub>log))?)?"
)


class KubeStub:
    def __init__(self, namespaces=("team",), runtimes=("torch-distributed",)):
        self.namespaces = set(namespaces)
        self.objects: dict[tuple[str, str], dict] = {}  # (kind, name) -> object
        for runtime in runtimes:  # as Kubeflow Trainer installs them
            self.objects[("clustertrainingruntimes", runtime)] = {"metadata": {"name": runtime}}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.pods: list[dict] = []
        self.refuse: dict[str, tuple[int, str]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, folder: Path) -> Path:
        path = folder / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stub", "cluster": {"server": self.url}}],
            "users": [{"name": "stub", "user": {}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
            "current-context": "stub",
        }
        path.write_text(json.dumps(config))
        return path

    def made(self, method: str, kind: str) -> list[dict]:
        """The bodies of the ``method`` requests on ``kind`` so far."""
        return [body for m, path, body in self.requests if m == method and f"/{kind}" in path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, method: str, path: str, body: dict | None) -> tuple[int, object]:
        self.requests.append((method, path, body))
        match = PATH.match(path)
        ns, kind, name, sub = (match.group(g) for g in ("ns", "kind", "name", "sub")) if match else (None,) * 4
        if kind is None and ns is not None:  # GET /api/v1/namespaces/NS
            return (
                (200, {"metadata": {"name": ns}})
                if ns in self.namespaces
                else (404, status(404, f'namespaces "{ns}" not found'))
            )
        if kind in self.refuse:
            code, message = self.refuse[kind]
            return code, status(code, message)
        if method == "POST":
            body["metadata"]["uid"] = str(uuid.uuid4())
            self.objects[(kind, body["metadata"]["name"])] = body
            return 201, body
        if kind == "pods" and name is None:
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": self.pods}
        if sub == "log":
            return 200, f"log of {name}\n"
        if (kind, name) not in self.objects:
            return 404, status(404, f'{kind} "{name}" not found')
        if method == "DELETE":
            return 200, self.objects.pop((kind, name))
        if method == "PATCH":
            self.objects[(kind, name)]["metadata"].update(body.get("metadata", {}))
        return 200, self.objects[(kind, name)]


def status(code: int, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}


def handler(stub: KubeStub):
    class Handler(BaseHTTPRequestHandler):
        def respond(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            code, answer = stub.answer(self.command, self.path.split("?")[0], body)
            data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = respond

        def log_message(self, *args):
            pass

    return Handler
