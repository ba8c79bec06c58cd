#!/usr/bin/env python3
# Python: the default python3 (numpy from pip) - only numpy is needed.
"""Every model on devsim, the simulated GPU (backends/devsim), in each
configuration, against the CPU backend. devsim computes with the CPU's
kernels on its own (poisoned, deferred, non-addressable) memory, so its
outputs must equal the CPU's bit for bit: same kernels, same values, same
order (runs use one thread so no work split can differ). Where devsim
declines fused nodes, their bodies run; the reference is then the CPU with
its fused kernels off (cpu:fused=0), and the match is again exact.

For each model and configuration it also checks the counts, three ways:
what devsim counted itself (its stats file), what the runtime reports
(kite-run --json) and what the configuration implies:
  - uploads and downloads per run: devsim's == the runtime's;
  - all nodes accepted: ONE segment per run, copies only for the graph's
    inputs (uploads) and outputs (downloads); none at all with unified=1;
  - unified=1: no uploads, not even of the weights (imported);
  - devsim's segments executed per run == its segments in the schedule
    (segments=0: none recorded, every kernel executed on its own).
and prints the table: model, configuration, uploads and downloads per run,
weights uploaded at creation, arena + weights bytes on the device.

Also checks that strict mode refuses a fallback, naming a node.

Usage: backend_configs.py --kite-convert P --kite-run P --plugin-dir DIR
                          --workdir DIR MODEL.onnx|MODEL.kite ...
Prints one line per model and configuration, the table, then
"N passed, N failed".
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402

# (label, devsim options). The declined ops are common to the CNNs and the
# transformers, so every model splits into several devsim segments.
DECLINED = "Add,Relu,MaxPool,Softmax,Transpose,Gemm"
CONFIGS = [
    ("all accepted", {}),
    ("unified", {"unified": "1"}),
    ("fused declined", {"decline_fused": "1"}),
    ("fused declined, unified", {"decline_fused": "1", "unified": "1"}),
    ("ops declined", {"decline_ops": DECLINED}),
    ("ops declined, unified", {"decline_ops": DECLINED, "unified": "1"}),
    ("no segments", {"segments": "0"}),
]
RUNS = 2  # one run, then --iterations 1


def main():
    ap = kite_driver.tool_parser(__doc__)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("models", nargs="+")
    args = kite_driver.parse_args(ap)
    verdicts = kite_driver.Verdicts()
    verdict = verdicts.record
    table = []

    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        kite = model
        if model.endswith(".onnx"):
            kite = os.path.join(args.workdir, name + ".kite")
            p = kite_driver.run_tool([args.kite_convert, model, "-o", kite, "-q"])
            if p.returncode != 0:
                verdict(False, f"{name} convert", p.stderr.strip())
                continue
        refs = {}
        for ref_name, extra in (("cpu", []), ("cpu-bodies", ["--backend-option", "cpu:fused=0"])):
            ref_dir = os.path.join(args.workdir, name, ref_name)
            p = kite_driver.run_tool([args.kite_run, kite, "--threads", "1", "--quiet",
                                      "--output-dir", ref_dir] + extra)
            if p.returncode != 0:
                verdict(False, f"{name} {ref_name}", p.stderr.strip())
                break
            refs[ref_name] = kite_driver.load_outputs(ref_dir)
        if len(refs) != 2:
            continue
        for label, options in CONFIGS:
            tag = label.replace(", ", "+").replace(" ", "-")
            out_dir = os.path.join(args.workdir, name, tag)
            stats_file = os.path.join(args.workdir, name, tag + ".devsim.json")
            json_file = os.path.join(args.workdir, name, tag + ".run.json")
            kite_driver.remove_files(stats_file, json_file)
            opts = dict(options, stats=stats_file)
            cmd = [args.kite_run, kite, "--threads", "1", "--backend", "devsim,cpu", "--backend-path",
                   args.plugin_dir, "--quiet", "--output-dir", out_dir, "--json", json_file,
                   "--iterations", str(RUNS - 1)]
            for k, v in opts.items():
                cmd += ["--backend-option", f"devsim:{k}={v}"]
            p = kite_driver.run_tool(cmd)
            full = f"{name} [{label}]"
            if p.returncode != 0:
                verdict(False, full, p.stderr.strip()[-600:])
                continue
            ref = refs["cpu-bodies" if "decline_fused" in options else "cpu"]
            got = kite_driver.load_outputs(out_dir)
            bad = [k for k in ref if k not in got or not np.array_equal(ref[k], got[k], equal_nan=True)]
            if bad:
                verdict(False, full, f"outputs differ from the CPU's: {bad}")
                continue
            with open(json_file) as f:
                report = json.load(f)
            with open(stats_file) as f:
                devsim = json.load(f)
            backend = next(b for b in report["backends"] if b["name"] == "devsim")
            problems = []
            runs = devsim["runs"]
            if runs != RUNS:
                problems.append(f"devsim saw {runs} runs, expected {RUNS}")
            run_counts = devsim["run"]
            up, down = run_counts["uploads"] / max(runs, 1), run_counts["downloads"] / max(runs, 1)
            if (up, down) != (report["uploads_per_run"], report["downloads_per_run"]):
                problems.append(f"devsim counted {up:g} uploads / {down:g} downloads per run, "
                                f"the runtime {report['uploads_per_run']} / {report['downloads_per_run']}")
            executed = run_counts["segments_executed"] / max(runs, 1)
            expected_executed = 0 if options.get("segments") == "0" else backend["segments"]
            if executed != expected_executed:
                problems.append(f"devsim executed {executed:g} segments per run, the schedule has "
                                f"{backend['segments']} on it")
            if options.get("segments") == "0" and run_counts["execute_calls"] / max(runs, 1) != backend["kernels"]:
                problems.append("without segments every kernel must be executed on its own")
            if devsim["setup"]["uploads"] != backend["weight_uploads"]:
                problems.append(f"devsim counted {devsim['setup']['uploads']} weight uploads, the runtime "
                                f"{backend['weight_uploads']}")
            if options.get("unified") == "1":
                if up or down or devsim["setup"]["uploads"]:
                    problems.append("unified memory must copy nothing")
                if not backend["unified"] or not backend["weights_imported"]:
                    problems.append("unified: the arena must be mapped and the weights imported")
            if label in ("all accepted", "unified"):
                on_devsim = all(p["backend"] == "devsim" for p in report["placement"])
                if not on_devsim or report["segments_per_run"] != 1:
                    problems.append(f"everything accepted must be ONE segment on devsim, got "
                                    f"{report['segments_per_run']}")
            if label == "all accepted" and (up, down) != (report["inputs"], report["outputs"]):
                # Copies only for the graph's inputs and outputs.
                problems.append(f"{up:g} uploads / {down:g} downloads per run for {report['inputs']} inputs "
                                f"and {report['outputs']} outputs")
            if problems:
                verdict(False, full, "; ".join(problems))
                continue
            table.append((name, label, report["uploads_per_run"], report["downloads_per_run"],
                          backend["weight_uploads"], backend["arena_bytes"], backend["weights_bytes"],
                          backend["weights_imported"], report["segments_per_run"]))
            verdict(True, full, f"{report['segments_per_run']} segments, {report['uploads_per_run']} up / "
                                f"{report['downloads_per_run']} down per run")
        # Strict mode turns the Conv fallback (every model here has a Conv or
        # a MatMul) into an error naming a node.
        p = kite_driver.run_tool([args.kite_run, kite, "--backend", "devsim,cpu", "--backend-path",
                                  args.plugin_dir, "--backend-option", "devsim:decline_ops=Conv,MatMul",
                                  "--backend-option", "devsim:decline_fused=1", "--strict", "--quiet"])
        ok = p.returncode != 0 and "strict mode" in p.stderr and "' -> cpu" in p.stderr
        verdict(ok, f"{name} strict", p.stderr.strip().splitlines()[0] if p.stderr.strip() else "no error")
    print()
    print(f"{'model':<20} {'devsim configuration':<26} {'up/run':>6} {'down/run':>8} {'weights up':>10} "
          f"{'arena B':>11} {'weights B':>11} {'segments':>8}")
    for name, label, up, down, wup, arena, weights, imported, segs in table:
        print(f"{name:<20} {label:<26} {up:>6} {down:>8} {wup:>10} {arena:>11} "
              f"{weights:>11}{'*' if imported else ' '} {segs:>7}")
    print("(* weights imported from the mapped file: no device copy)")
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
