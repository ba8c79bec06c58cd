#!/usr/bin/env python3
# Python: the default python3 (standard library only).
"""kite-run --profile and --json on the CPU and on devsim: the JSON carries
segments_per_run, transfers_per_run and a "profile" with one entry per node
(op, backend, fused/decomposed, mean time, share), totals per op type and per
backend; the shares of the measured nodes add up to 1 (within rounding of
the printed values, 1e-3); the per-backend totals add up to the total;
devsim's run is one segment with one upload and one download (the digits CNN
has one input and one output). Times themselves are not asserted.

Usage: test_run_json.py --kite-run P --plugin-dir DIR --model MODEL.kite --workdir DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402


def main():
    ap = kite_driver.tool_parser(__doc__, tools=("kite-run",))
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--model", required=True)
    args = kite_driver.parse_args(ap)
    failures = []
    for label, extra in (("cpu", []),
                         ("devsim", ["--backend", "devsim,cpu", "--backend-path", args.plugin_dir])):
        out = os.path.join(args.workdir, label + ".json")
        p = kite_driver.run_tool([args.kite_run, args.model, "--quiet", "--profile", "--iterations", "3",
                                  "--json", out] + extra)
        if p.returncode != 0:
            failures.append(f"{label}: kite-run failed: {p.stderr.strip()}")
            continue
        if "total by op type:" not in p.stdout or "total by backend:" not in p.stdout:
            failures.append(f"{label}: no profile table printed")
        with open(out) as f:
            report = json.load(f)
        prof = report.get("profile")
        if not isinstance(prof, dict):
            failures.append(f"{label}: no profile in the JSON")
            continue
        nodes = prof["nodes"]
        if len(nodes) != len(report["placement"]):
            failures.append(f"{label}: {len(nodes)} profiled nodes for {len(report['placement'])} placed")
        if prof["runs"] != 3:
            failures.append(f"{label}: profile over {prof['runs']} runs, expected the 3 timed runs")
        measured = [n for n in nodes if n["measured"]]
        if len(measured) != len(nodes):
            failures.append(f"{label}: {len(nodes) - len(measured)} nodes not measured")
        share = sum(n["share"] for n in measured)
        if measured and abs(share - 1.0) > 1e-3:
            failures.append(f"{label}: shares add up to {share}")
        by_backend = sum(prof["by_backend_ms"].values())
        if abs(by_backend - prof["total_ms"]) > 1e-3 * max(1.0, prof["total_ms"]):
            failures.append(f"{label}: per-backend totals {by_backend} != total {prof['total_ms']}")
        times = [n["mean_ms"] for n in nodes]
        if times != sorted(times, reverse=True):
            failures.append(f"{label}: nodes are not sorted by time")
        want_backend = label
        if any(n["backend"] != want_backend for n in nodes):
            failures.append(f"{label}: a node ran elsewhere: {[n['backend'] for n in nodes]}")
        expect = (1, 0) if label == "cpu" else (1, 2)
        got = (report["segments_per_run"], report["transfers_per_run"])
        if got != expect:
            failures.append(f"{label}: segments/transfers per run {got}, expected {expect}")
        print(f"{label}: {len(nodes)} nodes profiled over {prof['runs']} runs, "
              f"{report['segments_per_run']} segment(s), {report['transfers_per_run']} transfers per run")
    for f in failures:
        print("FAIL", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
