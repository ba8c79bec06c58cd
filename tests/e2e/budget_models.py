#!/usr/bin/env python3
# Python: the default python3 (pip's, with numpy: the tolerance check of step 4).
"""The memory budget on real models (issue 20's done-when checks).

For each --onnx model:
  1. kite-convert without a budget, and with --memory-budget RATIO (default
     0.6x) --report: the budgeted conversion must succeed (budget met), its
     report must say so (arena_after_bytes <= budget_bytes, budget_bytes =
     ratio x the unbudgeted lower bound), and the unbudgeted file's arena
     must be that lower bound's plan;
  2. kite-plan-check proves the budgeted file's plan;
  3. kite-run both files on the same seeded random inputs with the arena
     poisoned (NaN bytes) and the CPU backend's option winograd=0: every
     output must be byte-for-byte identical (patches and recomputation repeat
     the same arithmetic, see docs/MEMORY.md), so no tolerance;
  4. the same with Winograd on (the default): a banded 3x3 convolution may
     round differently from the whole one (its 4x4 tiles fall elsewhere, or
     a band is too small for Winograd), so every output must be within
     --rtol-of-max (default 1e-4, the model set's tolerance against
     onnxruntime) times the largest magnitude of the unbudgeted output.

Prints one line per check, then exactly "N passed, N failed"; exits 1 if
anything failed.

Usage:
  tests/e2e/budget_models.py --kite-convert P --kite-run P --kite-plan-check P \\
      --workdir DIR [--ratio 0.6] --onnx a.onnx [--onnx b.onnx ...]
"""
import io
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402


def main():
    ap = kite_driver.tool_parser(__doc__, tools=("kite-convert", "kite-run", "kite-plan-check"))
    ap.add_argument("--ratio", type=float, default=0.6)
    ap.add_argument("--onnx", action="append", required=True)
    ap.add_argument("--rtol-of-max", type=float, default=1e-4)
    args = kite_driver.parse_args(ap)
    verdicts = kite_driver.Verdicts()
    check = verdicts.record

    env = dict(os.environ, KITE_POISON_ARENA="1")
    for onnx_path in args.onnx:
        name = os.path.splitext(os.path.basename(onnx_path))[0]
        base = os.path.join(args.workdir, name)
        plain, budgeted = base + ".kite", base + "_budget.kite"
        r = kite_driver.run_tool([args.kite_convert, "-q", onnx_path, "-o", plain, "--report", base + ".json"])
        if not check(r.returncode == 0, f"{name}: converts without a budget {r.stderr.strip()}"):
            continue
        r = kite_driver.run_tool([args.kite_convert, "-q", onnx_path, "-o", budgeted,
                                  "--memory-budget", f"{args.ratio}x", "--report", base + "_budget.json"])
        if not check(r.returncode == 0, f"{name}: meets --memory-budget {args.ratio}x {r.stderr.strip()}"):
            continue
        with open(base + ".json") as f:
            plain_mem = json.load(f)["memory"]
        with open(base + "_budget.json") as f:
            b = json.load(f)["memory_budget"]
        check(b["met"] and b["arena_after_bytes"] <= b["budget_bytes"]
              and b["lower_bound_bytes"] == plain_mem["lower_bound_bytes"]
              and b["budget_bytes"] == int(args.ratio * plain_mem["lower_bound_bytes"]),
              f"{name}: report: lower bound {b['lower_bound_bytes']}, budget {b['budget_bytes']}, "
              f"arena {b['arena_before_bytes']} -> {b['arena_after_bytes']}, "
              f"+{b['flops_added']} FLOPs ({len(b['patches'])} patches, "
              f"{len(b['recomputed'])} recomputations)")
        r = kite_driver.run_tool([args.kite_plan_check, budgeted])
        check(r.returncode == 0 and "plan OK" in r.stdout, f"{name}: kite-plan-check {r.stdout.strip()}{r.stderr.strip()}")
        for winograd in ("0", "1"):
            outs = {}
            for tag, path in (("plain", plain), ("budget", budgeted)):
                out_dir = os.path.join(args.workdir, f"{name}_out_{tag}_w{winograd}")
                kite_driver.empty_dir(out_dir)
                r = kite_driver.run_tool([args.kite_run, path, "--seed", "7", "--output-dir", out_dir,
                                          "--backend-option", "cpu:winograd=" + winograd, "--quiet"],
                                         env=env)
                if not check(r.returncode == 0, f"{name}: kite-run {tag} winograd={winograd} {r.stderr.strip()}"):
                    break
                outs[tag] = {}
                for fn in sorted(os.listdir(out_dir)):
                    with open(os.path.join(out_dir, fn), "rb") as f:
                        outs[tag][fn] = f.read()
            if len(outs) != 2:
                continue
            same_names = outs["plain"].keys() == outs["budget"].keys() and len(outs["plain"]) > 0
            if winograd == "0":
                check(same_names and all(outs["plain"][k] == outs["budget"][k] for k in outs["plain"]),
                      f"{name}: outputs bit-identical with winograd=0 ({', '.join(outs['plain'])})")
                continue
            import numpy as np
            worst = 0.0
            for k in outs["plain"] if same_names else ():
                a = np.load(io.BytesIO(outs["plain"][k])).astype(np.float64)
                b = np.load(io.BytesIO(outs["budget"][k])).astype(np.float64)
                if a.shape != b.shape:
                    worst = float("inf")
                    continue
                scale = float(np.abs(a).max()) if a.size else 0.0
                diff = float(np.abs(a - b).max()) if a.size else 0.0
                worst = max(worst, diff / scale if scale > 0 else diff)
            check(same_names and worst <= args.rtol_of_max,
                  f"{name}: outputs with Winograd within {args.rtol_of_max:g} of max|unbudgeted| "
                  f"(worst {worst:.3g})")
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
