"""The zoo's tables and picture, from one run's results (run.py): the policies run for real
(quietus, a --policy template, a peer's kill model), each repetition scored apart and shown as a
range; the replayed peers (replay.py) over their thresholds; the per-fixture grid; the curves.
"""

import statistics

import policies
import replay

REAL_COLS = [("policy", "policy"), ("working_ok", "working ran"), ("false_kills", "false kills"),
             ("stalls_caught", "stalls caught"), ("late", "of them late"),
             ("lingering_ok", "lingering ok"), ("misses", "misses"),
             ("latency_median_s", "latency med (s)"), ("latency_max_s", "latency max (s)"),
             ("diagnosis_right", "diagnosis right"), ("leftover_processes", "leftovers"),
             ("errors", "errors")]


def _r(x):
    return None if x is None else round(x, 2)


def span(values):
    """One figure per repetition, shown as `v` when they agree, else `min–max`."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else "%s–%s" % (lo, hi)


def _real_counts(rs, fixtures):
    n = {t: sum(1 for f in fixtures if f["truth"] == t) for t in ("working", "stalled", "lingering")}
    caught = [r for r in rs if r["truth"] == "stalled" and r["outcome"] in ("caught", "late")]
    diag = [r for r in rs if "diagnosis_right" in r]
    return {
        "working_ok": sum(1 for r in rs if r["truth"] == "working" and r["outcome"] == "ok"),
        "n_working": n["working"], "n_stalled": n["stalled"], "n_lingering": n["lingering"],
        "false_kills": sum(1 for r in rs if r["outcome"] == "false_kill"),
        "stalls_caught": len(caught),
        "late": sum(1 for r in rs if r["outcome"] == "late"),
        "lingering_ok": sum(1 for r in rs if r["truth"] == "lingering" and r["outcome"] == "caught"),
        "misses": sum(1 for r in rs if r["outcome"] == "miss"),
        "diag_right": sum(r["diagnosis_right"] for r in diag), "diag_n": len(diag),
        "leftovers": sum(r["leftovers"] for r in rs),
        "errors": sum(1 for r in rs if r["outcome"] == "error"),
        "latencies": [r["latency_s"] for r in caught if r["latency_s"] is not None],
    }


def summarize_real(results, pols, fixtures, reps):
    rows = []
    for p in pols:
        per = [_real_counts([r for r in results if r["policy"] == p and r["rep"] == k], fixtures)
               for k in range(reps)]
        per = [c for c in per if c is not None]
        lat = [x for c in per for x in c["latencies"]]
        c0 = per[0]
        rows.append({
            "policy": p,
            "working_ok": "%s/%d" % (span([c["working_ok"] for c in per]), c0["n_working"]),
            "false_kills": span([c["false_kills"] for c in per]),
            "stalls_caught": "%s/%d" % (span([c["stalls_caught"] for c in per]), c0["n_stalled"]),
            "late": span([c["late"] for c in per]),
            "lingering_ok": "%s/%d" % (span([c["lingering_ok"] for c in per]), c0["n_lingering"]),
            "misses": span([c["misses"] for c in per]),
            "latency_median_s": _r(statistics.median(lat)) if lat else None,
            "latency_max_s": _r(max(lat)) if lat else None,
            "diagnosis_right": ("%s of %s" % (span([c["diag_right"] for c in per]),
                                              span([c["diag_n"] for c in per]))
                                if p in policies.QUIETUS_OPTIONS else "n/a"),
            "leftover_processes": span([c["leftovers"] for c in per]),
            "errors": span([c["errors"] for c in per]),
            "per_rep": [{k: v for k, v in c.items() if k != "latencies"} for c in per],
        })
    return rows


def replayed(results):
    """Every replayed verdict, flattened: (fixture, truth, rep, policy, k, kind, outcome, latency)."""
    out = []
    for r in results:
        for v in r.get("replayed") or []:
            out.append(dict(v, fixture=r["fixture"], truth=r["truth"], rep=r["rep"]))
    return out


def summarize_replayed(results, reps):
    """Per replayed policy and threshold, ranges over repetitions: `bad`, working programs ended
    (kill) or alarmed (soft), and stalls ended or alarmed before their stall instant; `good`,
    stalls ended or alarmed after their instant, however late; `window`, of those within the
    window; `miss`, stalls never ended or alarmed; the median latency past the deadline."""
    flat = replayed(results)
    keys = sorted({(v["policy"], v["k"], v["kind"]) for v in flat},
                  key=lambda x: (x[0], x[1]))
    rows = []
    for pol, k, kind in keys:
        vs = [v for v in flat if v["policy"] == pol and v["k"] == k]
        per = []
        for rep in range(reps):
            rv = [v for v in vs if v["rep"] == rep]
            if not rv:
                continue
            st = [v for v in rv if v["truth"] == "stalled"]
            per.append({
                "bad": sum(v["outcome"] in ("false_kill", "false_alarm", "early_alarm") for v in rv),
                "bad_working": sum(v["outcome"] in ("false_kill", "false_alarm") for v in rv
                                   if v["truth"] == "working"),
                "good": sum(v["latency_s"] is not None for v in st),
                "window": sum(v["outcome"] in ("caught", "late") or
                              (v["outcome"] == "alarm" and v["latency_s"] <= WINDOW_OF[0])
                              for v in st),
                "miss": sum(v["at_s"] is None for v in st),
                "nw": sum(v["truth"] == "working" for v in rv), "ns": len(st)})
        lat = [v["latency_s"] for v in vs if v["truth"] == "stalled" and v["latency_s"] is not None]
        rows.append({"policy": pol, "k": k, "kind": kind,
                     "bad": span([c["bad"] for c in per]), "good": span([c["good"] for c in per]),
                     "window": span([c["window"] for c in per]),
                     "miss": span([c["miss"] for c in per]),
                     "n_working": per[0]["nw"] if per else 0, "n_stalled": per[0]["ns"] if per else 0,
                     "bad_mean": statistics.mean(c["bad_working"] for c in per) if per else None,
                     "latency_median_s": _r(statistics.median(lat)) if lat else None})
    return rows


WINDOW_OF = [8.0]  # the run's window (set by markdown/svg callers from args)


def fixture_cells(results, fixture, policy):
    rs = sorted((r for r in results if r["fixture"] == fixture["name"] and r["policy"] == policy),
                key=lambda r: r["rep"])
    if not rs:
        return ""
    outs = [r["outcome"] for r in rs]
    label = {"ok": "ok", "caught": "caught", "late": "LATE", "false_kill": "FALSE KILL",
             "miss": "MISS", "error": "error"}
    if len(set(outs)) == 1:
        s = "%s ×%d" % (label[outs[0]], len(outs)) if len(outs) > 1 else label[outs[0]]
    else:
        s = "FLIP " + "/".join(label[o] for o in outs)
    lat = [r["latency_s"] for r in rs if r["latency_s"] is not None and r["outcome"] in ("caught", "late")]
    if lat:
        s += " %+.1f…%+.1fs" % (min(lat), max(lat)) if len(lat) > 1 and min(lat) != max(lat) else " %+.1fs" % lat[0]
    diag = [r for r in rs if "diagnosis_right" in r]
    if diag:
        wrong = sorted({r["diagnosis"] or "none" for r in diag if not r["diagnosis_right"]})
        s += " ✓" if not wrong else " ✗" + ",".join(wrong)
    left = [r["leftovers"] for r in rs if r["leftovers"]]
    if left:
        s += " +%s left" % span([r["leftovers"] for r in rs])
    return s


def replay_cell(results, fixture, policy, k):
    vs = [v for v in replayed([r for r in results if r["fixture"] == fixture["name"]])
          if v["policy"] == policy and v["k"] == k]
    if not vs:
        return ""
    label = {"ok": "ok", "caught": "caught", "late": "LATE", "false_kill": "FALSE KILL",
             "miss": "MISS", "quiet": "quiet", "false_alarm": "FALSE ALARM", "alarm": "alarm",
             "no_alarm": "no alarm", "early_alarm": "alarm before stall", "n/a": "-"}
    outs = [v["outcome"] for v in vs]
    if len(set(outs)) == 1:
        return label[outs[0]] + (" ×%d" % len(outs) if len(outs) > 1 else "")
    return "FLIP " + "/".join(label[o] for o in outs)


def fixture_flags(f):
    flags = []
    if f["tool"]:
        flags.append("tool: " + f["tool"])
    if f["source"]:
        flags.append("quietus-only source (%s)" % f["source"])
    if f["pty"]:
        flags.append("pty")
    return ", ".join(flags) or "-"


# the per-fixture grid's columns: run for real, or replayed at one threshold
GRID = [("quietus", None), ("quietus-repeat-cap", None), ("output-idle", 1), ("wall-clock", 3),
        ("openhands-no-change", 1), ("handoff-wall-clock", 3), ("desktop-commander-prompt", 1)]


def markdown(real_rows, rep_rows, results, pols, fixtures, args, elapsed, command):
    reps = args.repeat
    out = ["# Stall zoo results", "",
           "`%s`" % command, "",
           "T = %gs; %d fixtures (%s; %d real tools); each run %d times; window: a stall must be "
           "ended within T + %gs of its stall instant; working fixtures run %.1f s; %d runs at a "
           "time; %.0f s in all. Clock: CLOCK_BOOTTIME, stall instants at its /proc/uptime "
           "resolution (10 ms), which is the end-before-stall tolerance."
           % (args.idle, len(fixtures),
              ", ".join("%d %s" % (sum(f["truth"] == t for f in fixtures), t)
                        for t in ("working", "stalled", "lingering")),
              sum(1 for f in fixtures if f["tool"]), reps, args.window,
              args.work_t * args.idle, args.jobs, elapsed), "",
           "## Run for real (a range is min–max over the %d repetitions)" % reps, "",
           "| " + " | ".join(h for _, h in REAL_COLS) + " |", "|" + "---|" * len(REAL_COLS)]
    for row in real_rows:
        if row["policy"] in policies.OBSERVE:
            continue
        out.append("| " + " | ".join("-" if row[k] is None else str(row[k]) for k, _ in REAL_COLS) + " |")
    obs = [r for r in results if r["policy"] in policies.OBSERVE]
    if obs:
        bad = sorted({(r["fixture"], r["policy"], r["outcome"]) for r in obs if not r.get("fixture_ok")})
        out += ["", "Observation runs (no watchdog): %d, of which %d did not behave as their "
                "fixture declares%s." % (len(obs), len(bad), (": " + "; ".join(
                    "%s under %s: %s" % b for b in bad)) if bad else "")]
    n_w = rep_rows[0]["n_working"] if rep_rows else "-"
    n_s = rep_rows[0]["n_stalled"] if rep_rows else "-"
    out += ["", "## Replayed peers over their thresholds (k·T)", "",
            "Each peer replayed on the observation runs (`replay.py`). *Kill*: the program is "
            "ended. *Soft alarm*: control goes back to the model and the command runs on. False: "
            "working programs ended or alarmed (of %s), plus stalls ended or alarmed before their "
            "stall instant. Stalls (of %s) ended or alarmed after their instant, however late; of "
            "them within the window (T + %g s); never. Latency: median from the deadline (stall + "
            "T) to the end or first alarm. Ranges: min–max over the repetitions."
            % (n_w, n_s, args.window), "",
            "| policy | kind | k·T | false | stalls ended / alarmed | within the window | never | latency med (s) |",
            "|---|---|---|---|---|---|---|---|"]
    for row in rep_rows:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["policy"], row["kind"], row["k"], row["bad"], row["good"], row["window"],
            row["miss"], "-" if row["latency_median_s"] is None else row["latency_median_s"]))
    cols = [(p, k) for p, k in GRID if (k is None and p in pols) or
            (k is not None and any(r.get("replayed") for r in results))]
    extra = [p for p in pols if p not in policies.OBSERVE and p not in dict(GRID)]
    cols += [(p, None) for p in extra]
    head = ["%s%s" % (p, "" if k is None else "@%dT" % k) for p, k in cols]
    out += ["", "## Per fixture", "",
            "| fixture | truth | expected | what | " + " | ".join(head) + " |",
            "|---|---|---|---|" + "---|" * len(cols)]
    for f in fixtures:
        cells = [fixture_cells(results, f, p) if k is None else replay_cell(results, f, p, k)
                 for p, k in cols]
        out.append("| %s | %s | %s | %s | %s |" % (f["name"], f["truth"], f["kind"] or "-",
                                                   fixture_flags(f), " | ".join(cells)))
    flips = [(f["name"], p) for f in fixtures for p in pols
             if len({r["outcome"] for r in results
                     if r["fixture"] == f["name"] and r["policy"] == p}) > 1]
    out += ["", "Outcomes that differ between repetitions (FLIP): %s." %
            (", ".join("%s under %s" % x for x in flips) if flips else "none")]
    return "\n".join(out) + "\n"


def _esc(s):
    return (s or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


COLOURS = {"caught": "#2e7d32", "ok": "#81c784", "late": "#f9a825", "false_kill": "#c62828",
           "miss": "#6a1b9a", "error": "#9e9e9e", "quiet": "#81c784", "alarm": "#2e7d32",
           "false_alarm": "#ef6c00", "no_alarm": "#6a1b9a", "early_alarm": "#ef6c00",
           "flip": "#000000", "n/a": "#e0e0e0"}


SHORT = {"quietus-repeat-cap": "quietus+repeat", "openhands-no-change": "OpenHands",
         "handoff-wall-clock": "hand-off", "desktop-commander-prompt": "DC prompt"}


def _majority(outs):
    if not outs:
        return None
    if len(set(outs)) > 1:
        return "flip"
    return outs[0]


def svg(results, real_rows, rep_rows, pols, fixtures, args):
    """Left: the grid (fixtures × policies, the majority outcome over repetitions; black: the
    outcome flipped). Right: the curves: each thresholded policy's false kills (or false alarms)
    against its median detection latency, one point per k; quietus as its point(s)."""
    cw, ch, left, top = 96, 14, 200, 60
    cols = [(p, k) for p, k in GRID if (k is None and p in pols) or k is not None]
    gw = left + cw * len(cols)
    pw, ph = 520, 420  # the curves' panel
    w = gw + pw + 80
    h = max(top + ch * len(fixtures) + 60, top + ph + 120)
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="10">' % (w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="18" font-size="13" font-weight="bold">stall zoo, T = %gs, %d fixtures × %d runs: outcome per fixture (left), each policy over its threshold (right)</text>'
         % (args.idle, len(fixtures), args.repeat)]
    for j, (p, k) in enumerate(cols):
        name = SHORT.get(p, p) + ("" if k is None else "@%dT" % k)
        o.append('<text x="%d" y="%d" text-anchor="middle" font-weight="bold" font-size="9">%s</text>'
                 % (left + j * cw + cw / 2, top - 8, _esc(name[:18])))
    for i, f in enumerate(fixtures):
        y = top + i * ch
        mark = ("*" if f["tool"] else "") + ("†" if f["source"] else "")
        o.append('<text x="10" y="%d">%s %s%s</text>' % (y + 11, f["truth"][0].upper(), _esc(f["name"]), mark))
        for j, (p, k) in enumerate(cols):
            if k is None:
                outs = [r["outcome"] for r in results if r["fixture"] == f["name"] and r["policy"] == p]
            else:
                outs = [v["outcome"] for v in replayed([r for r in results if r["fixture"] == f["name"]])
                        if v["policy"] == p and v["k"] == k]
            m = _majority(outs)
            if m is None:
                continue
            o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s / %s: %s</title></rect>'
                     % (left + j * cw, y, cw - 2, ch - 2, COLOURS.get(m, "#e0e0e0"), _esc(f["name"]),
                        _esc(p), _esc(", ".join(outs))))
    y = top + len(fixtures) * ch + 14
    legend = [("ok", "right no-end"), ("caught", "right end / alarm"), ("late", "late"),
              ("false_kill", "false kill"), ("false_alarm", "false alarm"), ("miss", "miss / no alarm"),
              ("flip", "differs between runs")]
    for n, (key, lab) in enumerate(legend):
        o.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                 % (10 + n * 118, y, COLOURS[key], 24 + n * 118, y + 9, lab))
    o.append('<text x="10" y="%d">W/S/L: working/stalled/lingering; *: a real tool; †: rests on a source only quietus watches (.agent/)</text>' % (y + 24))
    o += _curves(real_rows, rep_rows, gw + 60, top, pw, ph)
    o.append("</svg>")
    return "\n".join(o) + "\n"


def _curves(real_rows, rep_rows, x0, y0, pw, ph):
    """x: working programs ended (kills) or alarmed (soft), % of the working fixtures, mean of
    the runs; y: median latency past the deadline of the stalls it ended (or alarmed on); the
    1T, 3T and 20T points carry the stalls it never ended (or never alarmed on)."""
    o = []
    series = {}
    for row in rep_rows:
        if row["latency_median_s"] is None or row["bad_mean"] is None or not row["n_working"]:
            continue
        series.setdefault((row["policy"], row["kind"]), []).append(
            (100.0 * row["bad_mean"] / row["n_working"], row["latency_median_s"], row["k"], row["miss"]))
    pts = []
    for row in real_rows:
        if row["policy"] in policies.OBSERVE or row["latency_median_s"] is None:
            continue
        c0 = row["per_rep"][0]
        fk = statistics.mean(c["false_kills"] for c in row["per_rep"])
        pts.append((row["policy"], 100.0 * fk / max(1, c0["n_working"]), row["latency_median_s"],
                    row["misses"]))
    ys = [p[1] for s in series.values() for p in s] + [p[2] for p in pts] + [1]
    xmax, ymin, ymax = 100.0, min(-3, min(ys)), max(ys) * 1.05
    X = lambda v: x0 + (v / xmax) * pw
    Y = lambda v: y0 + ph - ((v - ymin) / (ymax - ymin)) * ph
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (x0, y0, pw, ph))
    o.append('<text x="%d" y="%d" text-anchor="middle">working programs ended (kill) or alarmed (soft), %% of them, mean of the runs</text>'
             % (x0 + pw / 2, y0 + ph + 28))
    o.append('<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">median latency past the deadline (s), stalls ended/alarmed</text>'
             % (x0 - 46, y0 + ph / 2, x0 - 46, y0 + ph / 2))
    for t in range(6):
        v = ymin + (ymax - ymin) * t / 5
        o.append('<text x="%d" y="%d" text-anchor="end">%.0f</text>' % (x0 - 4, Y(v) + 3, v))
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>' % (x0, x0 + pw, Y(v), Y(v)))
        v2 = xmax * t / 5
        o.append('<text x="%d" y="%d" text-anchor="middle">%.0f%%</text>' % (X(v2), y0 + ph + 12, v2))
    o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="2 2"/>'
             % (x0, x0 + pw, Y(0), Y(0)))
    palette = ["#1565c0", "#c62828", "#ef6c00", "#6a1b9a", "#00838f", "#558b2f"]
    for n, ((pol, kind), pts_) in enumerate(sorted(series.items())):
        col = palette[n % len(palette)]
        pts_.sort(key=lambda p: p[2])
        dash = ' stroke-dasharray="5 3"' if kind == "alarm" else ""
        o.append('<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>'
                 % (col, dash, " ".join("%.1f,%.1f" % (X(a), Y(b)) for a, b, _, _ in pts_)))
        for a, b, k, miss in pts_:
            o.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s k=%d: %.0f%% working %s, median %.1f s, %s not %s</title></circle>'
                     % (X(a), Y(b), col, pol, k, a, "ended" if kind == "kill" else "alarmed", b, miss,
                        "ended" if kind == "kill" else "alarmed"))
            if k in (1, 3, 20) or len(pts_) == 1:
                o.append('<text x="%.1f" y="%.1f" fill="%s" font-size="8">%s (%s missed)</text>'
                         % (X(a) + 4, Y(b) - 3 - 9 * (n % 3), col, "%dT" % k if len(pts_) > 1 else "", miss))
        o.append('<text x="%d" y="%d" fill="%s">%s %s (%s)</text>' % (x0, y0 + ph + 46 + n * 12,
                                                                     col, "- - -" if kind == "alarm" else "———", pol, kind))
    for n, (pol, a, b, miss) in enumerate(pts):
        o.append('<rect x="%.1f" y="%.1f" width="8" height="8" fill="#000"><title>%s</title></rect>'
                 % (X(a) - 4, Y(b) - 4, pol))
        o.append('<text x="%.1f" y="%.1f" font-weight="bold">%s at T (%s missed)</text>'
                 % (X(a) + 7, Y(b) + 14 + 11 * n, _esc(pol), miss))
    return o
