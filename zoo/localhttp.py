"""The zoo's HTTP server on 127.0.0.1: real clients (git, pip, npm, curl, wget) fetch real
artifacts from it, served whole, slowly, or stalled mid-transfer.

Each run gets its own base address, `ZOO_HTTP=http://127.0.0.1:PORT/r/TOKEN`, where TOKEN names
the run's stall file (hex of its path): the server, which alone knows when it sends its last
bytes, writes the stall instant there. Under that base:

    MODE/blob                    2 MiB of random bytes (curl, wget)
    MODE/git/repo.git/...        a bare repository through `git http-backend` (smart HTTP)
    MODE/pypi/simple/zoo-pkg/    a PEP 503 index page naming one wheel
    MODE/pypi/files/WHEEL        the wheel (a valid one: pip reads its metadata)
    MODE/npm/zoo-pkg             the packument (npm's registry API)
    MODE/npm/-/zoo-pkg-1.0.0.tgz the tarball

MODE is `fast` (served at once), `slow` (the payload trickled in chunks every 0.25 s over
ZOO_WORK_SECONDS: a working transfer), `stall` (the payload's first STALL_PART bytes of a
larger Content-Length, then the stall instant is written and nothing more is ever sent; the
connection is held until the client goes) or `auth` (401 with a Basic challenge: a client on a
terminal asks for a user name). Only the payload (the blob, the pack, the wheel, the tarball)
is slowed or stalled; indexes and ref advertisements are served whole, so each client is
caught in the middle of its real transfer.
"""

import base64
import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import tarfile
import threading
import time
import zipfile

STALL_PART = 256 * 1024
SLOW_TICK = 0.25
BLOB_SIZE = 2 * 1024 * 1024


def token_for(path):
    return path.encode().hex()


def _stall_now(token):
    """Write the stall instant (the machine's uptime, as the fixtures do) to the run's file."""
    try:
        path = bytes.fromhex(token).decode()
    except ValueError:
        return
    write_stall(path)


def write_stall(path):
    """The stall instant, as `up:SECONDS` of /proc/uptime (the clock every fixture records)."""
    with open("/proc/uptime") as f:
        up = f.read().split()[0]
    with open(path, "w") as f:
        f.write("up:%s\n" % up)


def _wheel(payload):
    """A minimal valid wheel, zoo_pkg 1.0, carrying `payload` as a data file."""
    files = {
        "zoo_pkg/__init__.py": b"",
        "zoo_pkg/blob.bin": payload,
        "zoo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: zoo-pkg\nVersion: 1.0\n",
        "zoo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: zoo\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append("zoo_pkg-1.0.dist-info/RECORD,,")
    files["zoo_pkg-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _npm_tarball(payload):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as t:
        for name, data in (("package/package.json",
                            b'{"name":"zoo-pkg","version":"1.0.0","main":"index.js"}\n'),
                           ("package/index.js", b"module.exports = 1;\n"),
                           ("package/blob.bin", payload)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _git_repo(root):
    """A bare repository with one commit carrying 1.5 MiB of incompressible data."""
    src = os.path.join(root, "src")
    bare = os.path.join(root, "git", "repo.git")
    os.makedirs(src)
    env = dict(os.environ, GIT_AUTHOR_NAME="zoo", GIT_AUTHOR_EMAIL="zoo@localhost",
               GIT_COMMITTER_NAME="zoo", GIT_COMMITTER_EMAIL="zoo@localhost",
               GIT_CONFIG_NOSYSTEM="1", HOME=root)
    with open(os.path.join(src, "data.bin"), "wb") as f:
        f.write(os.urandom(1536 * 1024))
    with open(os.path.join(src, "README"), "w") as f:
        f.write("zoo\n")
    q = dict(env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["git", "init", "-q", "-b", "main", src], **q)
    subprocess.run(["git", "-C", src, "add", "."], **q)
    subprocess.run(["git", "-C", src, "commit", "-q", "-m", "zoo"], **q)
    subprocess.run(["git", "clone", "-q", "--bare", src, bare], **q)
    return os.path.join(root, "git")


class Artifacts:
    def __init__(self, root):
        self.blob = os.urandom(BLOB_SIZE)
        self.wheel_name = "zoo_pkg-1.0-py3-none-any.whl"
        self.wheel = _wheel(os.urandom(1024 * 1024))
        self.tgz = _npm_tarball(os.urandom(1024 * 1024))
        self.tgz_sha1 = hashlib.sha1(self.tgz).hexdigest()
        self.tgz_integrity = "sha512-" + base64.b64encode(hashlib.sha512(self.tgz).digest()).decode()
        self.git_root = _git_repo(root)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "zoo"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._serve(b"")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Encoding") == "gzip":
            import gzip
            body = gzip.decompress(body)
        self._serve(body)

    def _serve(self, body):
        path, _, query = self.path.partition("?")
        parts = path.split("/")
        # /r/TOKEN/MODE/rest...
        if len(parts) < 5 or parts[1] != "r":
            return self._plain(404, b"not found\n")
        token, mode, rest = parts[2], parts[3], "/".join(parts[4:])
        base = "http://%s/r/%s/%s" % (self.headers.get("Host", "127.0.0.1"), token, mode)
        if mode == "auth":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="zoo"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            _stall_now(token)  # from here on the client waits for a user name
            return
        a = self.server.artifacts
        if rest == "blob":
            return self._payload(mode, token, "application/octet-stream", a.blob)
        if rest.startswith("git/"):
            return self._git(mode, token, rest[4:], query, body)
        if rest == "pypi/simple/zoo-pkg/" or rest == "pypi/simple/zoo-pkg":
            html = ('<!DOCTYPE html><html><body><a href="%s/pypi/files/%s">%s</a></body></html>\n'
                    % (base, a.wheel_name, a.wheel_name)).encode()
            return self._plain(200, html, "text/html")
        if rest == "pypi/files/" + a.wheel_name:
            return self._payload(mode, token, "application/octet-stream", a.wheel)
        if rest == "npm/zoo-pkg":
            doc = {"name": "zoo-pkg", "dist-tags": {"latest": "1.0.0"},
                   "versions": {"1.0.0": {"name": "zoo-pkg", "version": "1.0.0",
                                          "dist": {"tarball": base + "/npm/-/zoo-pkg-1.0.0.tgz",
                                                   "shasum": a.tgz_sha1,
                                                   "integrity": a.tgz_integrity}}}}
            return self._plain(200, json.dumps(doc).encode(), "application/json")
        if rest == "npm/-/zoo-pkg-1.0.0.tgz":
            return self._payload(mode, token, "application/octet-stream", a.tgz)
        return self._plain(404, b"not found\n")

    def _plain(self, code, data, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _payload(self, mode, token, ctype, data, headers=()):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self._body(mode, token, data)

    def _body(self, mode, token, data):
        w = self.wfile
        if mode == "stall":
            w.write(data[:min(STALL_PART, len(data) // 2)])
            w.flush()
            _stall_now(token)
            self.close_connection = True
            self._hold()
        elif mode == "slow":
            work = self.server.work_seconds
            ticks = max(1, int(work / SLOW_TICK))
            step = -(-len(data) // ticks)
            for i in range(0, len(data), step):
                w.write(data[i:i + step])
                w.flush()
                time.sleep(SLOW_TICK)
        else:
            w.write(data)

    def _hold(self):
        """Send nothing more; keep the connection until the client goes (or the server stops)."""
        c = self.connection
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass

    def _git(self, mode, token, rest, query, body):
        """`git http-backend` (CGI) for the bare repository; the pack (git-upload-pack's answer)
        is the payload that MODE slows or stalls."""
        env = {"GIT_PROJECT_ROOT": self.server.artifacts.git_root, "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": "/" + rest, "QUERY_STRING": query,
               "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        head, _, data = out.partition(b"\r\n\r\n")
        if not _:
            head, _, data = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k and k.lower() != "content-length":
                headers.append((k, v.strip()))
        # the pack itself: protocol v2's `command=fetch` (or v0's wants), not `ls-refs`
        is_pack = (rest.endswith("/git-upload-pack") and self.command == "POST"
                   and (b"command=fetch" in body or b"want " in body))
        if status != 200 or not is_pack:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "application/octet-stream")
        self._payload(mode, token, ctype, data, [(k, v) for k, v in headers
                                                   if k.lower() != "content-type"])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args):
        super().__init__(*args)
        self.open_requests = set()
        self.requests_lock = threading.Lock()

    def finish_request(self, request, client_address):
        with self.requests_lock:
            self.open_requests.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.requests_lock:
                self.open_requests.discard(request)


class ZooHTTP:
    """The server, in a daemon thread for the whole run; `close()` stops it and drops every
    connection it holds."""

    def __init__(self, root, work_seconds):
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.artifacts = Artifacts(root)
        self.server.work_seconds = work_seconds
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True).start()

    def base(self, stall_file):
        return "http://127.0.0.1:%d/r/%s" % (self.port, token_for(stall_file))

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        # held connections: their handler threads sit in recv; shut them down
        with self.server.requests_lock:
            held = list(self.server.open_requests)
        for req in held:
            try:
                req.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
