#!/usr/bin/env python3
"""The stall zoo: run real programs (fixtures) under watchdog policies and score them.

    python3 zoo/run.py                      # every policy x every fixture
    python3 zoo/run.py --fast               # the quick representative subset
    python3 zoo/run.py --policy quietus --fixture s_sh_sleep --json out.json --svg docs/zoo.svg

Stdlib only (Python 3.9+). See zoo/README.md for the fixtures' header, the policies' models, the
metrics and their windows.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)

import localhttp  # noqa: E402
import policies  # noqa: E402
import replay  # noqa: E402
import report  # noqa: E402

TRUTHS = ("working", "stalled", "lingering")
KINDS = ("awaiting_input", "network_wait", "sleeping", "stopped", "waiting_on_child", "lock_wait",
         "disk_wait", "running", "unknown")
SERVERS = ("tcp_blackhole", "tcp_drip", "tcp_close", "tcp_refused", "udp_sink", "unix_sink",
           "cpu_load", "http")
# zoo-stdin: what the runner writes into the fixture's stdin pipe (else nothing, ever)
STDIN_FEEDS = ("tar", "tar-stall")
# zoo-source: a fixture whose only evidence of progress is a source only quietus watches
SOURCES = ("agent-dir",)


# ---------------------------------------------------------------- fixtures

def parse_fixture(path):
    """A fixture is a file of zoo/fixtures (`*.sh` run by sh, `*.py` by python3) whose leading
    comment holds `# zoo-KEY: value` lines: truth, kind, server, fast, heavy, thread."""
    name = os.path.splitext(os.path.basename(path))[0]
    meta = {"name": name, "path": path, "truth": None, "kind": None, "servers": [],
            "fast": False, "heavy": False, "pty": False, "thread": "-", "tool": None,
            "stdin": None, "source": None, "doc": []}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            body = line[1:].strip()
            if body.startswith("zoo-") and ":" in body:
                key, val = body[4:].split(":", 1)
                key, val = key.strip(), val.strip()
                if key == "truth":
                    meta["truth"] = val
                elif key == "kind":
                    meta["kind"] = val
                elif key == "server":
                    meta["servers"] = [s.strip() for s in val.split(",") if s.strip()]
                elif key in ("fast", "heavy", "pty"):
                    meta[key] = val.lower() in ("yes", "true", "1")
                elif key == "thread":
                    meta["thread"] = val
                elif key == "tool":
                    meta["tool"] = val
                elif key == "stdin":
                    feed = val.split()
                    if len(feed) != 2 or feed[0] not in STDIN_FEEDS or not feed[1].isdigit():
                        raise ValueError("%s: zoo-stdin must be `%s BYTES_PER_SECOND`"
                                         % (path, "|".join(STDIN_FEEDS)))
                    meta["stdin"] = (feed[0], int(feed[1]))
                elif key == "source":
                    if val not in SOURCES:
                        raise ValueError("%s: zoo-source must be one of %s" % (path, SOURCES))
                    meta["source"] = val
                else:
                    raise ValueError("%s: unknown header key zoo-%s" % (path, key))
            elif body:
                meta["doc"].append(body)
    if meta["truth"] not in TRUTHS:
        raise ValueError("%s: zoo-truth must be one of %s" % (path, TRUTHS))
    if meta["truth"] == "stalled" and meta["kind"] not in KINDS:
        raise ValueError("%s: a stalled fixture needs zoo-kind in %s" % (path, KINDS))
    for s in meta["servers"]:
        if s not in SERVERS:
            raise ValueError("%s: unknown server %s" % (path, s))
    meta["command"] = (["sh", path] if path.endswith(".sh") else ["python3", path])
    return meta


def load_fixtures():
    out = []
    for fn in sorted(os.listdir(FIXTURES)):
        if fn.startswith("_") or not fn.endswith((".sh", ".py")):
            continue
        out.append(parse_fixture(os.path.join(FIXTURES, fn)))
    order = {t: i for i, t in enumerate(TRUTHS)}
    out.sort(key=lambda m: (order[m["truth"]], m["name"]))
    return out


# ---------------------------------------------------------------- servers

class Servers:
    """Local servers on 127.0.0.1 (ephemeral ports) and a Unix socket, in daemon threads."""

    def __init__(self, tmp, work_seconds, http=True):
        self.env = {}
        self.socks = []
        self.conns = []
        self.lock = threading.Lock()
        self.http = None
        if http:
            self.http = localhttp.ZooHTTP(tmp, work_seconds)
            self.env["ZOO_HTTP_PORT"] = str(self.http.port)
        self._tcp("TCP_BLACKHOLE", self._blackhole)
        self._tcp("TCP_DRIP", self._drip)
        self._tcp("TCP_CLOSE", self._close)
        # a port nothing listens on: bound, then closed
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.env["ZOO_TCP_REFUSED_PORT"] = str(s.getsockname()[1])
        s.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        self.socks.append(u)
        self.env["ZOO_UDP_SINK_PORT"] = str(u.getsockname()[1])
        self._thread(self._udp_sink, u)
        path = os.path.join(tmp, "unix-sink.sock")
        x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        x.bind(path)
        x.listen(64)
        self.socks.append(x)
        self.env["ZOO_UNIX_SINK"] = path
        self._thread(self._accept, x, self._blackhole)

    def _thread(self, fn, *args):
        threading.Thread(target=fn, args=args, daemon=True).start()

    def _tcp(self, name, handler):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        self.socks.append(s)
        self.env["ZOO_%s_PORT" % name] = str(s.getsockname()[1])
        self._thread(self._accept, s, handler)

    def _accept(self, s, handler):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            self._thread(self._guard, handler, c)

    def _guard(self, handler, c):
        try:
            handler(c)
        except OSError:
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass
            with self.lock:
                if c in self.conns:
                    self.conns.remove(c)

    @staticmethod
    def _drain(c):
        while c.recv(65536):
            pass

    def _blackhole(self, c):
        """Accepts, reads and discards, never answers; holds the connection until the client goes."""
        self._drain(c)

    def _drip(self, c):
        """Reads a request line `NBYTES INTERVAL SECONDS close|hold` (anything before it, such as
        an HTTP request line, is skipped), then sends NBYTES every INTERVAL s for SECONDS s, then
        closes, or sends `event: end-of-drip` and holds the connection open (reading) until the client goes."""
        buf = b""
        while True:
            b = c.recv(4096)
            if not b:
                return
            buf += b
            lines = buf.split(b"\n")
            req = [ln for ln in lines[:-1] if len(ln.split()) == 4 and ln.split()[0].isdigit()]
            if req:
                break
        n, interval, seconds, then = req[0].decode().split()
        n, interval, seconds = int(n), float(interval), float(seconds)
        end = time.time() + seconds
        chunk = b"data: " + b"x" * max(0, n - 7) + b"\n"
        while time.time() < end:
            c.sendall(chunk[:n])
            time.sleep(interval)
        if then == "hold":
            c.sendall(b"event: end-of-drip\n")  # the last bytes: the client's stall instant
            self._drain(c)

    def _close(self, c):
        """Reads the request, then closes at once: the client's socket goes to CLOSE_WAIT."""
        c.settimeout(1.0)
        try:
            c.recv(4096)
        except socket.timeout:
            pass

    def _udp_sink(self, u):
        while True:
            try:
                u.recvfrom(65536)
            except OSError:
                return

    def close(self):
        if self.http:
            self.http.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        with self.lock:
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
                except OSError:
                    pass


class CpuLoad:
    """Load outside the fixture's tree: one busy process per core, started by the runner (no
    marker), ended by pid."""

    def __init__(self, env):
        n = os.cpu_count() or 2
        clean = {k: v for k, v in env.items() if k != "ZOO_MARKER"}
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], env=clean,
                                       stdin=subprocess.DEVNULL) for _ in range(n)]

    def stop(self):
        for p in self.procs:
            try:
                p.kill()
            except ProcessLookupError:
                pass
            p.wait()


# ---------------------------------------------------------------- markers

def marker_pids(marker):
    """Processes whose environment or command line carries the run's marker."""
    needle = marker.encode()
    found = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        for part in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (d, part), "rb") as f:
                    if needle in f.read():
                        found.append(int(d))
                        break
            except OSError:
                pass
    return found


def has_marker(pid, marker):
    needle = marker.encode()
    for part in ("environ", "cmdline"):
        try:
            with open("/proc/%d/%s" % (pid, part), "rb") as f:
                if needle in f.read():
                    return True
        except OSError:
            pass
    return False


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def settled_survivors(marker):
    """The marked processes still alive once the policy is done with the run, and how many the
    first scan saw: present in two scans 1 s apart (0.3 s and 1.3 s after), zombies and exiting
    processes aside. One scan counted a surviving loop's short-lived children (the `sleep`
    between two polls) in some runs and not in others: 2 or 1 for the same run (README.md)."""
    time.sleep(0.3)
    first = set(marker_pids(marker))
    if not first:
        return [], 0
    time.sleep(1.0)
    settled = sorted(p for p in set(marker_pids(marker)) & first if _state(p) not in (None, "Z", "X"))
    return settled, len(first)


def kill_marked(marker):
    """SIGKILL every process carrying the marker (and nothing else), until none is left."""
    for _ in range(50):
        pids = marker_pids(marker)
        if not pids:
            return
        for p in pids:
            if has_marker(p, marker):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)


# ---------------------------------------------------------------- one run

class Ctx:
    def __init__(self, args, fixture, policy, servers_env, tmp):
        self.T = args.idle
        self.window = args.window
        self.work = args.work_t * args.idle
        self.fixture = fixture
        self.policy = policy
        self.binary = args.binary
        self.marker = "zoo-%s" % uuid.uuid4().hex
        self.rundir = tempfile.mkdtemp(prefix="%s-%s-" % (fixture["name"], policy), dir=tmp)
        self.workdir = os.path.join(self.rundir, "work")
        os.mkdir(self.workdir)
        self.stall_file = os.path.join(self.rundir, "stall")
        self.command = fixture["command"]
        env = dict(os.environ)
        env.update(servers_env)
        env.update({
            "ZOO_MARKER": self.marker,
            "ZOO_T": "%g" % self.T,
            "ZOO_WORK_SECONDS": "%g" % self.work,
            "ZOO_STALL_FILE": self.stall_file,
            "ZOO_DIR": FIXTURES,
            "PYTHONPATH": FIXTURES,
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if "ZOO_HTTP_PORT" in servers_env:
            env["ZOO_HTTP"] = "http://127.0.0.1:%s/r/%s" % (servers_env["ZOO_HTTP_PORT"],
                                                           localhttp.token_for(self.stall_file))
        self.env = env
        self.t_start = None
        self.leader_pid = None
        self.proc = None
        self.stdin_r, self.stdin_w = os.pipe()  # a stdin nobody ever writes

    def has_marker(self, pid):
        return has_marker(pid, self.marker)

    def stall_instant(self):
        """The instant the fixture recorded, on the runner's clock. Shell fixtures record the
        machine's uptime (`up:SECONDS`, read and written by shell builtins: a `date` child would
        be a process of the tree moving bytes after the stall, which quietus rightly counts)."""
        try:
            with open(self.stall_file) as f:
                text = f.read().strip()
            if text.startswith("up:"):
                return float(text[3:])  # the runner's clock (CLOCK_BOOTTIME), 10 ms steps
            return float(text) - time.time() + policies.now()  # seconds since the epoch
        except (OSError, ValueError):
            return None

    def cut_at(self):
        """When the runner stops waiting: past the deadline window of a stall, the promptness
        window of a lingering fixture, or a working fixture's run plus the window."""
        t0 = self.t_start
        s = self.stall_instant()
        truth = self.fixture["truth"]
        if truth == "stalled" and s is not None:
            return s + self.T + self.window
        if truth == "lingering" and s is not None:
            return s + self.T + 1.0
        # a working fixture: its course (ZOO_WORK_SECONDS; a real tool's build or download may
        # take longer on a loaded machine) with room to spare: three times the course
        return t0 + max(3 * self.work, self.work + self.T + self.window)


def classify(ctx, res):
    """outcome: ok (a working fixture ran its course), caught (a stall ended in its window, or a
    lingering fixture finished promptly), late (caught, more than LATE past the deadline),
    false_kill, miss, error (the fixture did not behave as declared)."""
    T, truth = ctx.T, ctx.fixture["truth"]
    s = ctx.stall_instant()
    res["stall_instant"] = s
    ended = res["ended_at"]
    late = max(1.0, T / 2)
    res["latency"] = None
    if truth == "working":
        if ended is not None:
            return "false_kill"
        if res["cut"]:
            return "error"
        return "ok" if res["leader_rc"] == 0 else "error"
    if truth == "stalled":
        if s is None:
            return "false_kill" if ended is not None else "error"
        # the stall instant has the clock's resolution (10 ms, truncated): an end within one
        # step of it is not before it
        if ended is not None and ended < s - policies.CLOCK_RESOLUTION:
            return "false_kill"
        deadline = s + T
        if ended is not None and ended <= deadline + ctx.window:
            res["latency"] = ended - deadline
            return "late" if res["latency"] > late else "caught"
        if ended is None and not res["cut"]:
            return "error"  # it exited by itself: not a stall
        return "miss"
    # lingering
    if s is None:
        return "false_kill" if ended is not None else "error"
    if ended is not None and ended < s - policies.CLOCK_RESOLUTION:
        return "false_kill"
    if res["returned_at"] is not None and not res["cut"] and res["returned_at"] - s <= T:
        res["latency"] = res["returned_at"] - s
        return "caught"
    return "miss"


class StdinFeed:
    """`zoo-stdin: tar RATE`: the runner writes a tar archive of random data into the fixture's
    stdin at RATE bytes a second (a chunk every 0.25 s) for ZOO_WORK_SECONDS, then closes it.
    `tar-stall RATE`: the same for 1.5·T, then the stall instant, then nothing more, the pipe held
    open until the run is over. The feed owns the pipe's write end."""

    def __init__(self, ctx, kind, rate):
        self.ctx, self.kind, self.rate = ctx, kind, rate
        self.fd, ctx.stdin_w = ctx.stdin_w, None
        self.done = threading.Event()
        seconds = ctx.work if kind == "tar" else 3 * ctx.T
        self.data = self._archive(int(rate * seconds))
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    @staticmethod
    def _archive(size):
        import io
        import tarfile
        buf = io.BytesIO()
        payload = os.urandom(max(0, size - 3 * 512 - 10240))
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            info = tarfile.TarInfo("fed.bin")
            info.size = len(payload)
            t.addfile(info, io.BytesIO(payload))
        return buf.getvalue()

    def _feed(self):
        step = max(1, self.rate // 4)
        stop_at = time.time() + (1.5 * self.ctx.T if self.kind == "tar-stall" else 1e9)
        try:
            for i in range(0, len(self.data), step):
                if self.done.is_set() or time.time() >= stop_at:
                    break
                os.write(self.fd, self.data[i:i + step])
                time.sleep(0.25)
            if self.kind == "tar-stall":
                localhttp.write_stall(self.ctx.stall_file)
                self.done.wait()
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def stop(self):
        self.done.set()
        self.thread.join(timeout=5)


def run_one(args, fixture, policy, servers_env, tmp, rep=0):
    ctx = Ctx(args, fixture, policy, servers_env, tmp)
    load = CpuLoad(ctx.env) if "cpu_load" in fixture["servers"] else None
    feed = StdinFeed(ctx, *fixture["stdin"]) if fixture["stdin"] else None
    try:
        res = policies.run(ctx, policy)
    except Exception:
        res = {"ended_at": None, "returned_at": None, "cut": True, "leader_rc": None,
               "runner_error": traceback.format_exc()}
    finally:
        if load:
            load.stop()
        if feed:
            feed.stop()
    # leftovers: survivors once the policy is done with the run (for a cut run, only when the
    # fixture's leader is gone: a stalled tree cut by the runner is not "left behind")
    leader_gone = not res["cut"] or (ctx.proc is not None and ctx.proc.poll() is not None)
    if (policy in policies.QUIETUS_OPTIONS or policy in policies.TEMPLATES) and res["cut"]:
        leader_gone = fixture["truth"] == "lingering"
    survivors, first_scan = settled_survivors(ctx.marker) if leader_gone else ([], 0)
    res["leftovers"] = len(survivors) if leader_gone else 0
    res["leftover_names"] = sorted(set(_comm(p) for p in survivors)) if leader_gone else []
    kill_marked(ctx.marker)
    if ctx.proc is not None:
        try:
            ctx.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if ctx.stdin_w is not None:
        os.close(ctx.stdin_w)
    os.close(ctx.stdin_r)
    res["outcome"] = classify(ctx, res)
    t0 = ctx.t_start or 0
    out = {
        "policy": policy, "rep": rep, "fixture": fixture["name"], "truth": fixture["truth"],
        "expected_kind": fixture["kind"], "outcome": res["outcome"],
        "latency_s": _r(res.get("latency")),
        "ended_s": _r(res["ended_at"] - t0) if res.get("ended_at") else None,
        "returned_s": _r(res["returned_at"] - t0) if res.get("returned_at") else None,
        "stall_s": _r(res["stall_instant"] - t0) if res.get("stall_instant") else None,
        "how": res.get("how"), "cut": res["cut"], "leader_rc": res.get("leader_rc"),
        "leftovers": res["leftovers"], "leftover_names": res["leftover_names"],
        "leftovers_first_scan": first_scan,
        "diagnosis": res.get("diagnosis"), "diagnosis_summary": res.get("diagnosis_summary"),
        "report": res.get("report"), "runner_error": res.get("runner_error"),
    }
    if policy in policies.QUIETUS_OPTIONS and fixture["truth"] == "stalled" and res["outcome"] in ("caught", "late"):
        out["diagnosis_right"] = res.get("diagnosis") == fixture["kind"]
    if policy in policies.OBSERVE and res.get("trace") is not None:
        # the fixture's own course (no watchdog): did it behave as declared? Then every
        # thresholded peer is replayed on it (replay.py)
        out["fixture_ok"] = (res["outcome"] == "ok" if fixture["truth"] == "working" else
                             res["outcome"] == "miss" if fixture["truth"] == "stalled" else
                             res.get("stall_instant") is not None
                             and res.get("leader_exit") is not None)
        obs = {"trace": [(t, st, b) for t, st, b in res["trace"]],
               "end": out["returned_s"] if not res["cut"] else None,
               "stall": out["stall_s"], "pty": policy == "observe-pty",
               "cut_after": (policies.now() if res["cut"] else res["returned_at"]) - t0}
        if fixture["truth"] == "lingering":
            obs["end"] = None if res["cut"] else out["returned_s"]
        out["output_chunks"] = len(res["trace"])
        out["replayed"] = replay.replay(obs, fixture, args.idle, args.window) if out["fixture_ok"] else []
    shutil.rmtree(ctx.rundir, ignore_errors=True)
    return out


def _r(x):
    return None if x is None else round(x, 2)


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


# ---------------------------------------------------------------- scheduling

class Slots:
    """n slots; a heavy fixture (one that loads the CPU) takes them all."""

    def __init__(self, n):
        self.n, self.free = n, n
        self.cv = threading.Condition()

    def take(self, heavy):
        need = self.n if heavy else 1
        with self.cv:
            self.cv.wait_for(lambda: self.free >= need)
            self.free -= need
        return need

    def give(self, k):
        with self.cv:
            self.free += k
            self.cv.notify_all()


def run_all(args, fixtures, pols):
    tmp = tempfile.mkdtemp(prefix="zoo-")
    servers = Servers(tmp, args.work_t * args.idle,
                      http=any("http" in f["servers"] for f in fixtures))
    # each repetition whole before the next (the spread then spans the machine's moods)
    # (a fixture fed on its stdin has no terminal run: a terminal is not a pipe the runner feeds)
    jobs = [(f, p, k) for k in range(args.repeat) for f in fixtures for p in pols
            if not (f["stdin"] and p in ("observe-pty", "screen-no-change"))]
    # heavy ones first, alone; then the rest
    jobs.sort(key=lambda j: (not j[0]["heavy"], j[2]))
    results, lock = [], threading.Lock()
    slots = Slots(max(1, args.jobs))
    errors = []
    started = time.time()

    def work(f, p, rep):
        k = slots.take(f["heavy"])
        try:
            r = run_one(args, f, p, servers.env, tmp, rep)
        except Exception:
            errors.append(traceback.format_exc())
            r = None
        finally:
            slots.give(k)
        if r:
            with lock:
                results.append(r)
                if not args.quiet:
                    sys.stderr.write("[%4.0fs] %d %-18s %-24s %-10s %s\n" % (
                        time.time() - started, rep, p, f["name"], r["outcome"],
                        "" if r["latency_s"] is None else "%+.2fs" % r["latency_s"]))

    threads = []
    for f, p, rep in jobs:
        if f["heavy"]:
            work(f, p, rep)  # the heavy ones run alone, before the rest
            continue
        while sum(t.is_alive() for t in threads) >= args.jobs:
            time.sleep(0.02)
        t = threading.Thread(target=work, args=(f, p, rep))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    servers.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return results, errors, time.time() - started


def uptime():
    """The machine's uptime in seconds (`/proc/uptime`, the clock shell fixtures record)."""
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def default_binary():
    env = os.environ.get("QUIETUS_BINARY")
    if env:
        return env
    return os.path.join(ROOT, "target", "release", "quietus")


def write_outputs(args, fixtures, pols, results, elapsed, command):
    """The tables (stdout, --markdown), the JSON (--json) and the picture (--svg)."""
    real_rows = report.summarize_real(results, [p for p in pols if p not in policies.OBSERVE],
                                      fixtures, args.repeat)
    report.WINDOW_OF[0] = args.window
    rep_rows = report.summarize_replayed(results, args.repeat)
    md = report.markdown(real_rows, rep_rows, results, pols, fixtures, args, elapsed, command)
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    if args.json and not args.render:
        with open(args.json, "w") as f:
            json.dump({"command": command, "idle_timeout_s": args.idle, "window_s": args.window,
                       "work_s": args.work_t * args.idle, "binary": args.binary,
                       "repeat": args.repeat, "jobs": args.jobs, "elapsed_s": elapsed,
                       "clock_resolution_s": policies.CLOCK_RESOLUTION,
                       "templates": policies.TEMPLATES, "policies": pols,
                       "summary": real_rows, "replayed_summary": rep_rows,
                       "runs": sorted(results, key=lambda r: (r["fixture"], r["policy"], r["rep"])),
                       "fixtures": [{k: f[k] for k in ("name", "truth", "kind", "servers", "fast",
                                                        "thread", "tool", "source", "pty", "stdin")}
                                    for f in fixtures]}, f, indent=1)
    if args.svg:
        os.makedirs(os.path.dirname(os.path.abspath(args.svg)), exist_ok=True)
        with open(args.svg, "w") as f:
            f.write(report.svg(results, real_rows, rep_rows, pols, fixtures, args))


def render(args, fixtures):
    import gzip
    with (gzip.open(args.render, "rt") if args.render.endswith(".gz") else open(args.render)) as f:
        saved = json.load(f)
    args.idle, args.window = saved["idle_timeout_s"], saved["window_s"]
    args.work_t = saved["work_s"] / saved["idle_timeout_s"]
    args.repeat, args.jobs = saved["repeat"], saved["jobs"]
    names = {f["name"] for f in saved["fixtures"]}
    fixtures = [f for f in fixtures if f["name"] in names]
    write_outputs(args, fixtures, saved["policies"], saved["runs"], saved["elapsed_s"],
                  saved["command"])
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", metavar="NAME|NAME=TEMPLATE",
                    help="repeatable; one of %s (default: %s), or your watchdog as a command "
                         "template: 'NAME=mywatchdog --idle {T} -- {CMD}' (README.md, \"Your watchdog\")"
                         % (", ".join(policies.POLICIES), ", ".join(policies.DEFAULT_POLICIES)))
    ap.add_argument("--repeat", "-r", type=int, default=3,
                    help="runs of each fixture under each policy (default 3: the spread is reported)")
    ap.add_argument("--fixture", action="append", help="a fixture's name; repeatable; default all")
    ap.add_argument("--fast", action="store_true", help="only the fixtures marked zoo-fast")
    ap.add_argument("--binary", default=default_binary(),
                    help="quietus's binary (env QUIETUS_BINARY; default target/release/quietus)")
    ap.add_argument("--idle", type=float, default=3.0, help="the idle timeout T, seconds (default 3)")
    ap.add_argument("--window", type=float, default=8.0,
                    help="a stall ended later than T + WINDOW after its stall instant is a miss (default 8)")
    ap.add_argument("--work-t", type=float, default=3.5,
                    help="working fixtures run this many T (default 3.5)")
    ap.add_argument("--jobs", "-j", type=int, default=4, help="runs at a time (heavy fixtures run alone)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--svg", metavar="FILE", nargs="?", const=os.path.join(ROOT, "docs", "zoo.svg"),
                    help="draw the grid as SVG (default docs/zoo.svg)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the printed tables to FILE")
    ap.add_argument("--list", action="store_true", help="list the fixtures and exit")
    ap.add_argument("--check-tools", action="store_true",
                    help="say which real tools the selected fixtures need and are missing, and exit")
    ap.add_argument("--skip-missing-tools", action="store_true",
                    help="leave out the fixtures whose real tool is not installed (else: refuse)")
    ap.add_argument("--render", metavar="JSON",
                    help="run nothing: draw the tables and picture again from a --json file")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)

    try:
        fixtures = load_fixtures()
    except ValueError as e:
        print("zoo: %s" % e, file=sys.stderr)
        return 2
    if args.list:
        for f in fixtures:
            print("%-22s %-9s %-15s %s%s %s" % (f["name"], f["truth"], f["kind"] or "-",
                                             "fast " if f["fast"] else "", ",".join(f["servers"]), f["thread"]))
        return 0
    if args.render:
        return render(args, fixtures)
    if args.fixture:
        names = {f["name"] for f in fixtures}
        bad = [n for n in args.fixture if n not in names]
        if bad:
            print("zoo: unknown fixture(s): %s" % ", ".join(bad), file=sys.stderr)
            return 2
        fixtures = [f for f in fixtures if f["name"] in args.fixture]
    if args.fast:
        fixtures = [f for f in fixtures if f["fast"]]
    missing = sorted({f["tool"] for f in fixtures if f["tool"] and not shutil.which(f["tool"])})
    if args.check_tools:
        print("missing: %s" % (", ".join(missing) or "none"))
        return 1 if missing else 0
    if missing and args.skip_missing_tools:
        fixtures = [f for f in fixtures if f["tool"] not in missing]
    elif missing:
        print("zoo: real tools missing: %s (sh zoo/setup.sh, or --skip-missing-tools)"
              % ", ".join(missing), file=sys.stderr)
        return 2
    pols = []
    for p in args.policy or policies.DEFAULT_POLICIES:
        name, eq, template = p.partition("=")
        if eq:
            name = name.strip()
            if not name or name in policies.POLICIES or "{CMD}" not in template:
                print("zoo: --policy NAME=TEMPLATE needs a new NAME and a {CMD} word: %r" % p,
                      file=sys.stderr)
                return 2
            policies.TEMPLATES[name] = template
        elif name not in policies.POLICIES:
            print("zoo: unknown policy %r (one of %s, or NAME=TEMPLATE)"
                  % (name, ", ".join(policies.POLICIES)), file=sys.stderr)
            return 2
        if name not in pols:
            pols.append(name)
    if args.repeat < 1:
        print("zoo: --repeat must be at least 1", file=sys.stderr)
        return 2
    if any(p in policies.QUIETUS_OPTIONS for p in pols) and not os.access(args.binary, os.X_OK):
        print("zoo: no quietus binary at %s (cargo build --release, or --binary)" % args.binary, file=sys.stderr)
        return 2

    args.binary = os.path.abspath(args.binary)
    for name, template in policies.TEMPLATES.items():
        first = shlex.split(template)[0]
        if os.path.exists(first):  # a path relative to here: the fixture runs elsewhere
            policies.TEMPLATES[name] = shlex.quote(os.path.abspath(first)) + template[len(template.split(None, 1)[0]):]
    results, errors, elapsed = run_all(args, fixtures, pols)
    for e in errors:
        print("zoo: runner error:\n%s" % e, file=sys.stderr)
    rerr = [r for r in results if r.get("runner_error")]
    for r in rerr:
        print("zoo: runner error in %s/%s:\n%s" % (r["policy"], r["fixture"], r["runner_error"]), file=sys.stderr)
    command = "python3 zoo/run.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    write_outputs(args, fixtures, pols, results, elapsed, command)
    return 1 if (errors or rerr) else 0


if __name__ == "__main__":
    sys.exit(main())
