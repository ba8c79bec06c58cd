#!/usr/bin/env python3
# Python: the default python3 (numpy) - only numpy is needed.
"""The model set on the CUDA backend against the CPU backend.

Each model is converted (-O2), run on the CPU (the reference) and on the
backend under test (`--backend cuda` on a GPU, `cudaemu` for the plugin's
code over the host emulator of the driver) with the same seeded inputs,
and compared: max |out - ref| <= tolerance x max |ref| (default 1e-3,
issue 14's bound: fp32 kernels that sum in another order than the CPU, and
cuDNN/cuBLASLt algorithms with their own orders, differ by far less).
CNNs must run every node on the backend (none on the CPU); every model
reports its placement. With --option KEY=VALUE (repeatable) the backend gets options
(lean=1, unified=1, ...).

Usage: model_set.py --kite-convert P --kite-run P --plugin-dir DIR --backend NAME
                    --workdir DIR [--option K=V ...] [--cnn NAME ...] MODEL.onnx ...
Prints one line per model, then "N passed, N failed". Exits 77 (skipped)
when the backend has no device here, with the reason.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402

CNNS = {"resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
        "shufflenet_v2_x1_0", "convnext_tiny", "unet_small", "digits_cnn"}


def main():
    ap = kite_driver.tool_parser(__doc__)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--backend", default="cudaemu")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--option", dest="options", action="append", default=[], help="KEY=VALUE for the backend (repeatable)")
    ap.add_argument("--table", help="append the results as a Markdown table to this file")
    ap.add_argument("models", nargs="+")
    a = kite_driver.parse_args(ap)
    backend_args = ["--backend-path", a.plugin_dir]
    for o in a.options:
        backend_args += ["--backend-option", f"{a.backend}:{o}"]

    passed = failed = 0
    rows = []
    for path in a.models:
        name = os.path.splitext(os.path.basename(path))[0]
        work = os.path.join(a.workdir, name)
        os.makedirs(work, exist_ok=True)
        model = path
        if path.endswith(".onnx"):
            model = os.path.join(work, name + ".kite")
            fresh = os.path.exists(model) and os.path.getmtime(model) >= os.path.getmtime(path)
            c = kite_driver.run_tool(["true"] if fresh else [a.kite_convert, path, "-o", model])
            if c.returncode != 0:
                print(f"FAIL {name}: kite-convert: {c.stderr.strip()[-400:]}")
                failed += 1
                continue
        ref_dir, out_dir = os.path.join(work, "ref"), os.path.join(work, "out")
        for d in (ref_dir, out_dir):
            kite_driver.empty_dir(d)
        r = kite_driver.run_tool([a.kite_run, model, "--backend", "cpu", "--seed", "0", "--output-dir", ref_dir,
                                  "--quiet"])
        if r.returncode != 0:
            print(f"FAIL {name}: CPU reference: {r.stderr.strip()[-400:]}")
            failed += 1
            continue
        report = os.path.join(work, "run.json")
        cmd = [a.kite_run, model, "--backend", f"{a.backend},cpu", "--seed", "0", "--output-dir", out_dir,
               "--json", report, "--poison", "--quiet"] + backend_args
        r = kite_driver.run_tool(cmd)
        if f"backend '{a.backend}' is not available" in r.stderr:
            why = r.stderr.strip().splitlines()[0]
            print(f"SKIP: {why}")
            return 77
        if r.returncode != 0:
            print(f"FAIL {name}: {a.backend}: {r.stderr.strip()[-600:]}")
            failed += 1
            continue
        info = json.load(open(report))
        placement = info.get("placement", [])
        on_backend = sum(1 for p in placement if p.get("backend") == a.backend)
        decomposed = sum(1 for p in placement if p.get("decomposed"))
        elsewhere = [f"{p.get('op')} '{p.get('node')}': {p.get('reason', '')}" for p in placement
                     if p.get("backend") != a.backend]
        ref, out = kite_driver.load_outputs(ref_dir), kite_driver.load_outputs(out_dir)
        worst = 0.0
        problem = ""
        if set(ref) != set(out) or not ref:
            problem = f"outputs differ: {sorted(ref)} vs {sorted(out)}"
        for k in ref:
            if problem:
                break
            x, y = ref[k].astype(np.float64), out[k].astype(np.float64)
            if x.shape != y.shape:
                problem = f"{k}: shape {y.shape} vs {x.shape}"
                break
            if not np.all(np.isfinite(y)):
                problem = f"{k}: non-finite values"
                break
            scale = max(float(np.max(np.abs(x))), 1e-6)
            worst = max(worst, float(np.max(np.abs(x - y))) / scale)
        if not problem and worst > a.tolerance:
            problem = f"max |diff| / max |ref| = {worst:.3g} > {a.tolerance:g}"
        if not problem and name in CNNS and elsewhere:
            problem = f"{len(elsewhere)} node(s) of a CNN not on {a.backend}: " + "; ".join(elsewhere[:3])
        segs = info.get("segments_per_run", "?")
        transfers = info.get("transfers_per_run", "?")
        line = (f"{name}: {on_backend}/{len(placement)} nodes on {a.backend} ({decomposed} decomposed), "
                f"{segs} segments, {transfers} transfers per run, error {worst:.2e}")
        rows.append((name, on_backend, len(placement), decomposed, segs, transfers, worst, not problem))
        if problem:
            print(f"FAIL {line}: {problem}")
            failed += 1
        else:
            print(f"PASS {line}")
            if elsewhere:
                print("     not on the backend: " + "; ".join(elsewhere[:5]))
            passed += 1
    if a.table:
        with open(a.table, "a") as t:
            opts = " ".join(a.options) if a.options else "defaults"
            t.write(f"\n### {a.backend} ({opts})\n\n| model | nodes on {a.backend} | decomposed | segments | "
                    "transfers | max err / max ref | ok |\n|---|---|---|---|---|---|---|\n")
            for n, on, total, dec, segs, tr, err, ok in rows:
                t.write(f"| {n} | {on}/{total} | {dec} | {segs} | {tr} | {err:.2e} | {'yes' if ok else 'NO'} |\n")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
