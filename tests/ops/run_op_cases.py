#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11) for numpy (the same interpreter that runs gen_op_cases.py).
"""Run Kite's single-op sweep (made by tests/ops/gen_op_cases.py) through kite-convert and kite-run.

Usage:
  tests/ops/run_op_cases.py --cases DIR --kite-convert PATH --kite-run PATH
      [--workdir DIR] [--only-ops Conv,Gemm] [--skip-ops Resize] [--cases-matching REGEX]
      [--threads N] [--jobs N] [-v]

For each DIR/<case>/: kite-convert model.onnx -> <workdir>/<case>/model.kite, then
kite-run with --input <name>=input_<i>.npy, then each expected_<i>.npy is compared
with <workdir>/<case>/out/<sanitized output name>.npy:
  float:       |kite - expected| <= atol + rtol*|expected| element-wise, with the
               case's atol/rtol from meta.json (each justified in gen_op_cases.py);
               NaN/Inf must appear in the same places.
  int / bool:  exact (values; the dtype must match too).
A conversion failure (e.g. an unsupported op) is a FAIL that quotes the converter.

Prints "PASS case" or "FAIL case: reason" per case, then "N passed, N failed"
(plus ", N skipped" when filters left cases out); exits 1 on any failure.
"""
import concurrent.futures
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kite_driver import check_tools, compare_array, run_tool, sanitize, tool_parser  # noqa: E402


def first_lines(text, n=4, width=400):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    err = [l for l in lines if re.search(r"error|unsupported|not supported|fail", l, re.I)]
    pick = (err or lines)[:n]
    s = " | ".join(pick)
    return s if len(s) <= width else s[:width] + "..."


def run_case(case_dir, args):
    """Returns (ok, message)."""
    name = os.path.basename(case_dir)
    with open(os.path.join(case_dir, "meta.json")) as f:
        meta = json.load(f)
    wd = os.path.join(args.workdir, name)
    if os.path.isdir(wd):
        shutil.rmtree(wd)
    out_dir = os.path.join(wd, "out")
    os.makedirs(out_dir)

    kite_file = os.path.join(wd, "model.kite")
    rc, so, se = run_tool([args.kite_convert, os.path.join(case_dir, "model.onnx"), "-o", kite_file],
                          args.timeout)
    if args.verbose:
        sys.stdout.write(so + se)
    if rc != 0:
        return False, f"kite-convert exited {rc}: {first_lines(se or so) or '(no message)'}"
    if not os.path.exists(kite_file):
        return False, "kite-convert exited 0 but wrote no .kite file"

    cmd = [args.kite_run, kite_file]
    for i, n in enumerate(meta["inputs"]):
        cmd += ["--input", f"{n}={os.path.abspath(os.path.join(case_dir, f'input_{i}.npy'))}"]
    cmd += ["--output-dir", out_dir]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    rc, so, se = run_tool(cmd, args.timeout)
    if args.verbose:
        sys.stdout.write(so + se)
    if rc != 0:
        return False, f"kite-run exited {rc}: {first_lines(se or so) or '(no message)'}"

    for i, n in enumerate(meta["outputs"]):
        f = os.path.join(out_dir, sanitize(n) + ".npy")
        if not os.path.exists(f):
            return False, f"output '{n}': kite-run wrote no {os.path.basename(f)}"
        try:
            got = np.load(f, allow_pickle=False)
        except Exception as e:
            return False, f"output '{n}': cannot load {f}: {e}"
        exp = np.load(os.path.join(case_dir, f"expected_{i}.npy"))
        why = compare_array(n, exp, got, float(meta["atol"]), float(meta["rtol"]))
        if why:
            return False, why
    if not args.keep:
        shutil.rmtree(wd, ignore_errors=True)
    return True, ""


def main():
    ap = tool_parser(__doc__, workdir_help="scratch folder (default: a temporary one)", timeout=120)
    ap.add_argument("--cases", required=True, help="folder written by gen_op_cases.py")
    ap.add_argument("--only-ops", default="", help="comma-separated op types to run")
    ap.add_argument("--skip-ops", default="", help="comma-separated op types to skip")
    ap.add_argument("--cases-matching", default="", help="regex on case names")
    ap.add_argument("--max-priority", type=int, default=99, help="skip cases of a higher priority")
    ap.add_argument("--threads", type=int, default=0, help="kite-run --threads, if > 0")
    ap.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1), help="cases run in parallel")
    ap.add_argument("--keep", action="store_true", help="keep the work folders of passing cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the tools' output (use --jobs 1)")
    args = ap.parse_args()

    check_tools(args.kite_convert, args.kite_run)
    if not os.path.isdir(args.cases):
        sys.exit(f"error: no cases folder {args.cases} (make it with tests/ops/gen_op_cases.py --out ...)")
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="kite-op-cases-"))
    os.makedirs(args.workdir, exist_ok=True)

    only = {s for s in args.only_ops.split(",") if s}
    skip = {s for s in args.skip_ops.split(",") if s}
    pattern = re.compile(args.cases_matching) if args.cases_matching else None
    selected, skipped = [], 0
    for name in sorted(os.listdir(args.cases)):
        d = os.path.join(args.cases, name)
        mf = os.path.join(d, "meta.json")
        if not os.path.isfile(mf):
            continue
        with open(mf) as f:
            meta = json.load(f)
        op = meta.get("op", "")
        if ((only and op not in only) or op in skip or (pattern and not pattern.search(name))
                or meta.get("priority", 1) > args.max_priority):
            skipped += 1
            continue
        selected.append(d)
    if not selected:
        print("no cases selected")

    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_case, d, args) for d in selected]
        for d, fut in zip(selected, futures):  # report in sorted order
            name = os.path.basename(d)
            try:
                ok, msg = fut.result()
            except Exception as e:
                ok, msg = False, f"runner error: {type(e).__name__}: {e}"
            if ok:
                passed += 1
                print(f"PASS {name}", flush=True)
            else:
                failed += 1
                print(f"FAIL {name}: {msg}", flush=True)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
