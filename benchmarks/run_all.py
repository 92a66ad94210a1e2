"""Run the quick variant of every benchmark script and regenerate ``benchmarks/RESULTS.md``.

Each script runs in its own process, one after the other (they would disturb each other's
timings otherwise), with the arguments listed in ``SCRIPTS`` below: the quick flags where the
script's default run is too long for a routine refresh (the RESULTS.md says which). The
output is the machine (cores, CPU model, RAM), the date, the load average before and after
each script, its command line, wall time, exit status and everything it printed.

``peers/run_peers.py`` runs in the peers' venv (``benchmarks/peers/.venv``, made by
``setup_peers.sh``) and is skipped when that venv does not exist; scripts that are missing
from the checkout, and the satellite-grid scripts when ``../shared/data`` has no grid, are
reported as skipped.

Usage::

    .venv/bin/python benchmarks/run_all.py                 # quick variants, write RESULTS.md
    .venv/bin/python benchmarks/run_all.py --only scale heaton --out /tmp/R.md
    .venv/bin/python benchmarks/run_all.py --full          # the scripts' default (long) runs

The quick set took 13 minutes on 2 cores at load ≈ 2 (longer on a busier machine).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_PY = HERE / "peers" / ".venv" / "bin" / "python"

# name: (script, quick arguments, full arguments, what the quick variant leaves out)
SCRIPTS = {
    "cholmod": ("bench_cholmod.py", [], [],
                "none: the default run (M = 10⁴ and 10⁵; `--large` adds 10⁶)"),
    "afs_vs_sgpr": ("bench_afs_vs_sgpr.py",
                    ["--n", "3000", "--m-afs", "16,32,64,128", "--m-sgpr", "16,32,64"], [],
                    "N = 3,000 instead of 10,000; M ≤ 128 (AFS), ≤ 64 (SGPR)"),
    "afs_precompute": ("bench_afs_precompute.py",
                       ["--n", "200000", "--grid", "1024", "--dense-budget", "30"], [],
                       "2·10⁵ scattered points instead of 10⁶; 1024² raster, not 2048²"),
    "wavelet_patch": ("bench_wavelet_patch.py", ["--seeds", "2", "--n2d", "20000"], [],
                      "2 seeds instead of 5; 2-D timing at N = 2·10⁴ instead of 10⁵"),
    "placement": ("bench_placement.py", ["timing", "--targets", "50"], ["all"],
                  "timing part only, |T| ≤ 50 targets for mi (no active-learning loop)"),
    "heaton": ("heaton_cv.py", ["--quick"], [],
               "two configurations, random fold only (no block fold)"),
    "scale": ("bench_scale.py", ["--quick"], [],
              "1024² and 2048² in memory and a dask run at 4096² (default: up to 4096² and "
              "dask 8192²)"),
    "large_m": ("bench_afs_large_m.py", ["--quick"], [],
                "512² raster instead of 1024²; M ≤ 3·10⁴ (default 10⁵); fits up to M = 10⁴"),
    "peers": ("peers/run_peers.py", ["--quick"], [],
              "random fold only, fewer iterations and a 120 s training budget per peer"),
}


from _machine import cpu_model  # noqa: E402  (benchmarks/ is on sys.path when run)


def machine() -> dict:
    cpu = cpu_model(platform.processor() or platform.machine())
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cores": os.cpu_count(), "cpu": cpu, "ram_gib": mem,
            "python": platform.python_version(), "os": platform.platform()}


def load() -> str:
    la = os.getloadavg()
    return f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f}"


def git_rev() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=False).stdout
        return out + (" (+ uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_one(name: str, full: bool, timeout: float) -> dict:
    script, quick_args, full_args, quick_note = SCRIPTS[name]
    path = HERE / script
    rec = {"name": name, "script": script, "note": "" if full else quick_note}
    if not path.exists():
        rec.update(status="skipped: script not in this checkout", output="")
        return rec
    python = sys.executable
    if name == "peers":
        if not PEERS_PY.exists():
            rec.update(status="skipped: benchmarks/peers/.venv missing (run "
                              "benchmarks/peers/setup_peers.sh)", output="")
            return rec
        python = str(PEERS_PY)
    cmd = [python, str(path)] + (full_args if full else quick_args)
    shown = " ".join(shlex.quote(c) for c in
                     [os.path.relpath(cmd[0], ROOT), os.path.relpath(cmd[1], ROOT), *cmd[2:]])
    rec.update(command=shown, load_before=load())
    print(f"[run_all] {shown}  (load {rec['load_before']})", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              check=False)
        out, code = proc.stdout, proc.returncode
        err = proc.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"TIMEOUT after {timeout:.0f} s"
        code = "timeout"
    rec.update(wall_s=time.perf_counter() - t0, load_after=load(), exit=code, output=out)
    rec["status"] = "ok" if code == 0 else f"exit {code}"
    if code != 0:
        tail = "\n".join((err or "").strip().splitlines()[-25:])
        rec["output"] = out + ("\n--- stderr (last lines) ---\n" + tail if tail else "")
    print(f"[run_all] {name}: {rec['status']} in {rec['wall_s']:.0f} s", flush=True)
    return rec


def render(records: list, m: dict, started: str, full: bool, start_load: str) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Generated by `benchmarks/run_all.py`" + (" --full" if full else "")
        + ". Regenerate with `.venv/bin/python benchmarks/run_all.py` (see "
        "`benchmarks/README.md` for what each script measures).",
        "",
        f"- date: {started} (UTC offset of the machine: "
        f"{time.strftime('%z')})",
        f"- machine: {m['cores']} cores, {m['cpu']}, {m['ram_gib']:.1f} GiB RAM; "
        f"Python {m['python']}; {m['os']}",
        f"- geogp commit: {git_rev()}",
        f"- load average at the start (1, 5, 15 min): {start_load}",
        "",
        "The machine is shared with other jobs: wall-clock times are noisy, and each script's "
        "load average before/after is recorded with it. Sizes are the quick variants unless "
        "`--full` was given; each section says what its quick variant leaves out.",
        "",
        "| script | status | wall [s] | load before → after | quick variant |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for r in records:
        wall = f"{r['wall_s']:.0f}" if "wall_s" in r else "-"
        la = (f"{r['load_before'].split()[0]} → {r['load_after'].split()[0]}"
              if "load_after" in r else "-")
        note = (r["note"] or "full run").replace("|", "\\|")  # keep the table's columns
        lines.append(f"| `{r['script']}` | {r['status']} | {wall} | {la} | {note} |")
    for r in records:
        lines += ["", f"## {r['script']}", ""]
        if "command" in r:
            lines.append(f"`{r['command']}` — {r['status']}, {r.get('wall_s', 0):.0f} s, load "
                         f"{r['load_before']} → {r.get('load_after', '?')}")
        else:
            lines.append(r["status"])
        if r.get("note"):
            lines += ["", f"Quick variant: {r['note']}."]
        if r.get("output"):
            lines += ["", "```", r["output"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=list(SCRIPTS), help="run these scripts only")
    ap.add_argument("--full", action="store_true", help="the scripts' default (long) runs")
    ap.add_argument("--timeout", type=float, default=1800.0,
                    help="seconds per script before it is stopped (default 1800)")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="output Markdown file")
    args = ap.parse_args(argv)
    names = args.only or list(SCRIPTS)
    m = machine()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    start_load = load()
    print(f"[run_all] {started}: {m['cores']} cores, {m['cpu']}, {m['ram_gib']:.1f} GiB, "
          f"load {load()}", flush=True)
    records = []
    for name in names:
        records.append(run_one(name, args.full, args.timeout))
        # write after each script, so a long or interrupted run keeps what it has
        text = render(records, m, started, args.full, start_load)
        tmp = Path(args.out).with_suffix(".md.tmp")
        tmp.write_text(text)
        tmp.replace(args.out)
    print(f"[run_all] wrote {args.out}", flush=True)
    return 0 if all(r["status"] == "ok" or r["status"].startswith("skipped")
                    for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
