"""A Hugging Face Hub of a few small files, served on loopback, so the real huggingface_hub client
downloads from it and writes its real cache, with no network.

It answers what ``hf_hub_download`` asks (huggingface_hub 2.4.0 ``file_download.py``): ``HEAD`` and
``GET /{repo}/resolve/{revision}/{file}`` with ``X-Repo-Commit`` and ``ETag``, and the errors the
client turns into its exceptions by their ``X-Error-Code`` (RepoNotFound, RevisionNotFound,
EntryNotFound, GatedRepo). Bounded: 127.0.0.1 on a free port, a request budget (418 past it, which
the client does not retry), a socket timeout, stopped on exit.

    with FakeHub({"acme/tiny": {"main": {"config.json": b"{...}"}, "v1": {...}}}) as hub:
        hf_hub_download("acme/tiny", "config.json", endpoint=hub.url, cache_dir=tmp, token=False)
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from urllib.parse import unquote, urlsplit


def blob_sha1(data: bytes) -> str:
    """A git blob's id: the ETag the Hub sends for a file that is not in LFS."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self, repos: dict[str, dict[str, dict[str, bytes]]], gated: dict[str, set[str]] | None = None,
                 max_requests: int = 200) -> None:
        self.commits = {repo: {rev: hashlib.sha1(f"{repo}@{rev}".encode()).hexdigest() for rev in revs}
                        for repo, revs in repos.items()}
        self.repos, self.gated, self.max_requests = repos, gated or {}, max_requests
        self.requests: list[str] = []
        self.url = ""

    def commit(self, repo: str, revision: str = "main") -> str:
        return self.commits[repo][revision]

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 10

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.answer(self)

            do_GET = do_HEAD

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def answer(self, h) -> None:
        self.requests.append(f"{h.command} {h.path}")
        if len(self.requests) > self.max_requests:
            return self.send(h, 418, {}, b"budget")
        repo, _, rest = urlsplit(h.path).path.lstrip("/").partition("/resolve/")
        revision, _, filename = rest.partition("/")
        repo, revision, filename = unquote(repo), unquote(revision), unquote(filename)
        if repo not in self.repos:
            return self.error(h, 404, "RepoNotFound")
        if repo in self.gated:
            token = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
            if token not in self.gated[repo]:
                return self.error(h, 401 if not token else 403, "GatedRepo")
        by_sha = {sha: rev for rev, sha in self.commits[repo].items()}
        rev = revision if revision in self.repos[repo] else by_sha.get(revision)
        if rev is None:
            return self.error(h, 404, "RevisionNotFound")
        sha, files = self.commits[repo][rev], self.repos[repo][rev]
        if filename not in files:
            return self.error(h, 404, "EntryNotFound", {"X-Repo-Commit": sha})
        data = files[filename]
        self.send(h, 200, {"X-Repo-Commit": sha, "ETag": f'"{blob_sha1(data)}"'}, data)

    def error(self, h, status: int, code: str, extra: dict | None = None) -> None:
        self.send(h, status, {"X-Error-Code": code, "X-Error-Message": code, **(extra or {})},
                  json.dumps({"error": code}).encode())

    @staticmethod
    def send(h, status: int, headers: dict, body: bytes) -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
