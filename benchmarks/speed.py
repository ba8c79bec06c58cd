#!/usr/bin/env python3
# Python: the default python3 (pip onnxruntime + onnx + numpy), for Kite and onnxruntime;
# MNN and ncnn run in a venv of this benchmark's own (see --venv).
"""CPU latency: Kite against onnxruntime, MNN and ncnn on the model set, at
several thread counts, in one run of this script (compare ratios, not
absolute times from different runs or machines).

Usage:
  benchmarks/speed.py --bin-dir build/default --models-dir DIR [--models a,b]
                      [--threads 1,2] [--rounds 3] [--warmup 3] [--iterations 20]
                      [--peers ort,mnn,ncnn] [--venv benchmarks/.venv-peers]
                      [--workdir DIR] [--kite python|kite-run] [--kite-python DIR]
                      [--check-binding] [--json FILE]

Engines, all fp32 on the CPU with the same thread count:
- Kite through its Python package, `kite.Model(...).session(...).run(feeds)`,
  in this process. When the package cannot be imported (or with --kite
  kite-run), Kite's time is kite-run's own in-process timer (its --json
  latency p50), which leaves out the binding's input copy and output
  allocation that the peers' figures include, so it favours Kite slightly;
  the table says which was used. --check-binding also runs kite-run and
  prints its p50 next to the package's, which shows what the binding costs.
- onnxruntime (`ort`): `InferenceSession.run` in this process, intra-op
  threads = the thread count, sequential execution.
- MNN (`mnn`, PyPI `mnn`): the ONNX file converted by MNN's converter (fp32
  weights), run by its Module API on the CPU backend with numThread = the
  thread count and precision "high".
- ncnn (`ncnn`, PyPI `ncnn`): the ONNX file converted by PyPI `pnnx`
  (inputshape from the model's inputs, fp16=0), run by `ncnn.Net` with
  num_threads = the thread count and Vulkan, fp16, bf16 and int8 off.
MNN, ncnn and pnnx live in a virtual environment of this benchmark's own
(--venv; made on first use with `python3 -m venv --system-site-packages` on
Debian's python, whose torch satisfies pnnx's, then `pip install mnn ncnn
pnnx`): MNN's tools pull an old protobuf that breaks `import onnx`, and pnnx
pulls in PyPI's torch. A peer whose package cannot be installed or imported
is listed as unavailable (n/a), not timed; --peers picks a subset
(onnxruntime stays the reference either way).

One harness for all: every engine is timed by bench_common.time_calls, wall
clock around one call that takes the inputs and returns new output arrays.
MNN and ncnn run in a worker process in the venv (benchmarks/peer_worker.py,
driven over a pipe), which times them with that same function, so the pipe
is outside the timed calls. Before the models, each engine runs a single
Relu on a 1x16 tensor: its p50 is the engine's cost per call (binding,
input/output copies, fixed session work), printed in microseconds, to set
against the models' times (a few us to a few tens of us, against
milliseconds for the vision models; for text_transformer, about 0.2 ms,
it is not negligible, so read that row with it in mind).

Method: per model, sessions are made once per engine and thread count; then
--rounds rounds, each timing every (threads, engine) pair for --iterations
runs after --warmup runs (more runs for a model whose single run is short:
enough for --min-time-ms of timed work at onnxruntime's speed on the fewest
threads asked for, the same count for every engine), the engines' order rotated from round to round so
none always runs first (on a warmer or cooler core); per pair the smallest
p50 over the rounds is kept. Before timing, each engine's outputs on the same
seeded inputs are compared with the reference (onnxruntime, which the model
set is checked against in tests/e2e/compare_with_ort.py). Kite must meet the
model set's rule, max|x - ref| <= 1e-4 * max|ref|, or it is reported as WRONG
and not timed. A peer within 1e-2 * max|ref| but past 1e-4 is timed and its
time marked '*' (its kernels round differently: this benchmark measures
speed, and the bound says only that the conversion is sound); past 1e-2 its
conversion is taken as broken, WRONG, not timed. A conversion or a load or
run that fails is FAILED, not timed. The reason for each is printed under
the model's rows.

Prints the CPU (model name, the ISA extensions that matter for fp32 kernels,
and the micro-kernel Kite picked), the peers' versions, the cost of one call
per engine, then per model and thread count the p50s (ms), Kite/onnxruntime,
Kite/best peer and which peer that was; at the end, per thread count, the
geometric means of Kite/onnxruntime and of Kite/best peer over the models
where both were timed (the count is printed beside each). Converted models
go to a temporary folder, or to --workdir, where they are kept and reused
while newer than their ONNX file.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

from bench_common import core_latency, core_latency_ns, describe_cpu, ensure_venv, find_tool, seeded_feeds, time_calls

MODEL_SET = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
             "squeezenet1_1", "shufflenet_v2_x1_0", "convnext_tiny", "vit_small",
             "text_transformer", "unet_small"]
PEERS = ["ort", "mnn", "ncnn"]
REMOTE_PACKAGES = {"mnn": ["mnn"], "ncnn": ["ncnn", "pnnx"]}  # PyPI packages of the venv's peers
HERE = os.path.dirname(os.path.abspath(__file__))
RTOL_OF_MAX = 1e-4  # the model set's tolerance (tests/e2e/compare_with_ort.py explains it)
# A peer past the model set's tolerance but within this is timed and marked '*'
# (its kernels round differently, e.g. an approximated exp); past it, its
# conversion is taken as broken: WRONG, not timed.
PEER_RTOL_OF_MAX = 1e-2


def check(outputs, ref, rtol=RTOL_OF_MAX):
    """'' when every output is within rtol * max|ref|, else what differs."""
    for name, r in ref.items():
        if name not in outputs:
            return f"output '{name}' missing"
        x = np.asarray(outputs[name])
        if x.shape != r.shape:
            return f"output '{name}' shape {x.shape}, expected {r.shape}"
        if not np.issubdtype(r.dtype, np.floating):
            if not np.array_equal(x, r):
                return f"output '{name}' differs"
            continue
        diff = float(np.max(np.abs(x.astype(np.float64) - r))) if r.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        bound = rtol * (scale if scale > 0 else 1.0)
        if not diff <= bound:
            return f"output '{name}' max|diff| {diff:.3g} > {bound:.3g}"
    return ""


class OrtEngine:
    name = "ort"

    def __init__(self, onnx_path, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.s.get_outputs()]

    def run(self, feeds):
        return dict(zip(self.names, self.s.run(None, feeds)))

    def p50(self, feeds, warmup, iterations):
        return time_calls(lambda: self.s.run(None, feeds), warmup, iterations)


class KitePyEngine:
    name = "kite"

    def __init__(self, kite_mod, kite_path, threads):
        self.s = kite_mod.Model(kite_path).session(backends=["cpu"], threads=threads, strict=True)

    def run(self, feeds):
        return self.s.run(feeds)

    def p50(self, feeds, warmup, iterations):
        return time_calls(lambda: self.s.run(feeds), warmup, iterations)


class KiteRunEngine:
    """kite-run in a child process; its own timer (excludes process start and load)."""
    name = "kite"

    def __init__(self, run_tool, kite_path, threads, workdir):
        self.tool, self.path, self.threads, self.workdir = run_tool, kite_path, threads, workdir

    def _inputs(self, feeds):
        args = []
        for name, arr in feeds.items():
            f = os.path.join(self.workdir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".in.npy")
            np.save(f, arr)
            args += ["--input", f"{name}={f}"]
        return args

    def run(self, feeds):
        out_dir = os.path.join(self.workdir, "out")
        os.makedirs(out_dir, exist_ok=True)
        p = subprocess.run([self.tool, self.path, "--quiet", "--threads", str(self.threads),
                            "--backend", "cpu", "--strict", "--output-dir", out_dir]
                           + self._inputs(feeds), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-300:])
        return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
                if f.endswith(".npy")}

    def p50(self, feeds, warmup, iterations):
        report = os.path.join(self.workdir, "report.json")
        p = subprocess.run([self.tool, self.path, "--quiet", "--threads", str(self.threads),
                            "--backend", "cpu", "--strict", "--warmup", str(warmup),
                            "--iterations", str(iterations), "--json", report]
                           + self._inputs(feeds), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-300:])
        with open(report) as fh:
            return json.load(fh)["latency_ms"]["p50"]


class PeerWorker:
    """benchmarks/peer_worker.py in the peers' venv: MNN and ncnn sessions
    live there, and it times them with bench_common.time_calls as this
    process times Kite and onnxruntime. Its stderr (the engines' chatter)
    goes to a log file, whose tail explains a worker that died."""

    def __init__(self, python, log_path):
        self.log_path = log_path
        self.log = open(log_path, "a")
        self.p = subprocess.Popen([python, os.path.join(HERE, "peer_worker.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, cwd=HERE)
        hello = self._read()
        self.versions, self.why = hello["available"], hello["why"]

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            with open(self.log_path) as fh:
                tail = (fh.read().strip().splitlines() or [""])[-1]
            raise RuntimeError(f"peer worker exited ({self.p.returncode}): {tail[:200]}")
        return json.loads(line)

    def alive(self):
        return self.p.poll() is None

    def request(self, **msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def close(self):
        if self.alive():
            self.p.stdin.close()
            self.p.wait()
        self.log.close()


class RemoteEngine:
    """An MNN or ncnn session in the worker. Its feeds are the .npz file the
    model's seeded feeds were saved to (run and p50 take the dict only to
    look like the other engines)."""

    def __init__(self, worker, name, path, threads, inputs, outputs, feeds_path, workdir):
        self.w, self.name, self.feeds_path = worker, name, feeds_path
        self.out_path = os.path.join(workdir, f"{name}-{threads}.out.npz")
        self.id = worker.request(op="load", engine=name, path=path, threads=threads,
                                 inputs=inputs, outputs=outputs)["id"]

    def run(self, feeds):
        self.w.request(op="run", id=self.id, feeds=self.feeds_path, out=self.out_path)
        with np.load(self.out_path) as z:
            return {k: z[k] for k in z.files}

    def p50(self, feeds, warmup, iterations):
        return self.w.request(op="p50", id=self.id, feeds=self.feeds_path,
                              warmup=warmup, iterations=iterations)["p50"]

    def free(self):
        if self.w.alive():
            self.w.request(op="free", id=self.id)


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no message"


def stale(made, source):
    """Whether a converted file (kept by --workdir) must be made again."""
    return not os.path.exists(made) or os.path.getmtime(made) < os.path.getmtime(source)


def convert_mnn(python, onnx_path, out_dir, name):
    """(model.mnn, '') or (None, why). MNN's converter is called straight
    (`_tools.mnnconvert`, what the `mnnconvert` script runs): the script first
    imports MNN's usage logger, which runs `pip install -U
    aliyun-log-python-sdk` with whatever pip is first on PATH, and that
    pulls a protobuf < 6 into the default python and breaks `import onnx`."""
    out = os.path.join(out_dir, name + ".mnn")
    if stale(out, onnx_path):
        p = subprocess.run([python, "-c", "import sys, _tools; _tools.mnnconvert(sys.argv)",
                            "-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", out,
                            "--bizCode", "kite"], capture_output=True, text=True)
        if not os.path.isfile(out) or os.path.getsize(out) == 0:
            return None, "mnnconvert: " + last_line(p.stdout + p.stderr)
    return out, ""


def convert_ncnn(pnnx, onnx_path, out_dir, name, feeds):
    """(model.ncnn.param, '') or (None, why): pnnx with the feeds' shapes and
    integer types, fp16=0 for fp32 weights. pnnx writes beside its input, so
    it reads a link to the ONNX file in out_dir."""
    local = os.path.join(out_dir, name + ".onnx")
    param = os.path.join(out_dir, name + ".ncnn.param")
    if stale(param, onnx_path):
        if not os.path.exists(local):
            os.symlink(os.path.abspath(onnx_path), local)
        shapes = ",".join("[" + ",".join(str(d) for d in x.shape) + "]" +
                          ({np.dtype(np.int64): "i64", np.dtype(np.int32): "i32"}.get(x.dtype, ""))
                          for x in feeds.values())
        p = subprocess.run([pnnx, local, f"inputshape={shapes}", "fp16=0"],
                           capture_output=True, text=True, cwd=out_dir)
        if p.returncode != 0 or not os.path.exists(param):
            return None, "pnnx: " + last_line(p.stdout + p.stderr)
    return param, ""


def trivial_model(path):
    """One Relu on a 1x16 tensor: its p50 is an engine's cost per call (the
    binding, the session's fixed work), not the model's."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 16])
    g = helper.make_graph([helper.make_node("Relu", ["input"], ["output"])], "relu", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def import_kite(extra_path):
    if extra_path:
        sys.path.insert(0, os.path.abspath(extra_path))
    try:
        import kite  # noqa: F401
        return kite, ""
    except Exception as e:  # ImportError, or a broken install's error
        return None, f"{type(e).__name__}: {e}"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


class Peers:
    """The peers asked for with --peers: onnxruntime in this process, MNN and
    ncnn in a PeerWorker in the venv. unavailable: {peer: why it is left out}."""

    def __init__(self, names, venv, log_path):
        self.names, self.unavailable, self.versions = names, {}, {"ort": ort.__version__}
        self.python, self.worker, self.log_path = None, None, log_path
        remote = [n for n in names if n in REMOTE_PACKAGES]
        if not remote:
            return
        python, missing = ensure_venv(venv, sorted({p for n in remote for p in REMOTE_PACKAGES[n]}))
        for n in remote:
            why = "; ".join(f"{p}: {missing[p]}" for p in REMOTE_PACKAGES[n] if p in missing)
            if why or python is None:
                self.unavailable[n] = why or "no venv"
        if python is None:
            return
        self.python, self.pnnx = python, os.path.join(os.path.dirname(python), "pnnx")
        try:
            self.worker = PeerWorker(python, log_path)
        except (OSError, RuntimeError) as e:
            for n in remote:
                self.unavailable.setdefault(n, str(e))
            return
        for n in remote:
            if n in self.worker.versions:
                self.versions[n] = self.worker.versions[n]
            else:
                self.unavailable.setdefault(n, self.worker.why.get(n, "does not import"))

    def timed(self):
        return [n for n in self.names if n not in self.unavailable]

    def remote(self):
        return [n for n in self.timed() if n in REMOTE_PACKAGES]

    def revive(self):
        """A new worker when the last one died (a model that crashed an engine)."""
        if self.worker and not self.worker.alive():
            self.worker.close()
            self.worker = PeerWorker(self.python, self.log_path)


def measure(name, onnx_path, threads, ctx, args, iterations):
    """One row per thread count: every engine's smallest p50 over the rounds,
    or why it was not timed (status 'WRONG: ...' or 'FAILED: ...')."""
    peers = ctx.peers
    kite_path = os.path.join(ctx.work, name + ".kite")
    p = subprocess.run([ctx.convert, onnx_path, "-o", kite_path, "-q"], capture_output=True, text=True)
    kite_why = "" if p.returncode == 0 else "FAILED: kite-convert: " + last_line(p.stderr)
    feeds = seeded_feeds(onnx_path)
    feeds_path = os.path.join(ctx.work, name + ".feeds.npz")
    np.savez(feeds_path, **feeds)
    files = {}
    if "mnn" in peers.remote():
        files["mnn"] = convert_mnn(peers.python, onnx_path, ctx.peer_dir, name)
    if "ncnn" in peers.remote():
        files["ncnn"] = convert_ncnn(peers.pnnx, onnx_path, ctx.peer_dir, name, feeds)
    engines, status, notes, ref, ort_first = {}, {}, {}, None, None
    for t in threads:
        o = OrtEngine(onnx_path, t)
        ort_first = ort_first or o
        ref = o.run(feeds) if ref is None else ref
        engines[t] = []
        if kite_why:
            status[(t, "kite")] = kite_why
        else:
            if ctx.kite_mod:
                k = KitePyEngine(ctx.kite_mod, kite_path, t)
            else:
                k = KiteRunEngine(ctx.run_tool, kite_path, t, os.path.join(ctx.work, f"{name}-{t}"))
                os.makedirs(k.workdir, exist_ok=True)
            engines[t].append(k)
            try:
                wrong = check(k.run(feeds), ref)
                status[(t, "kite")] = "WRONG: " + wrong if wrong else ""
            except Exception as e:  # a run error is reported like a wrong output
                status[(t, "kite")] = f"FAILED: {e}"
        if "ort" in peers.timed():
            engines[t].append(o)
            status[(t, "ort")] = ""
        for peer in peers.remote():
            path, why = files[peer]
            if path is None:
                status[(t, peer)] = "FAILED: " + why
                continue
            try:
                peers.revive()
                e = RemoteEngine(peers.worker, peer, path, t, list(feeds), o.names, feeds_path, ctx.work)
                engines[t].append(e)
                out = e.run(feeds)
                wrong = check(out, ref, PEER_RTOL_OF_MAX)
                status[(t, peer)] = "WRONG: " + wrong if wrong else ""
                near = "" if wrong else check(out, ref)
                if near:
                    notes[(t, peer)] = "timed, but past the model set's tolerance: " + near
            except Exception as e:  # mnn/ncnn cannot load or run what their converter made
                status[(t, peer)] = f"FAILED: {e}"
    # Runs a round: --iterations, or more where they would take under
    # --min-time-ms (the smallest models run in 0.1-0.3 ms, and 20 runs of
    # them gave p50s that moved by a third between rounds). Estimated from
    # onnxruntime's session at the fewest threads, the same for every
    # engine.
    if args.min_time_ms > 0:
        single_ms = time_calls(lambda: ort_first.run(feeds), 0, 3)
        iterations = max(iterations, int(math.ceil(args.min_time_ms / max(single_ms, 1e-3))))
    best = {}
    for r in range(args.rounds):
        for t in threads:
            live = [e for e in engines[t] if not status[(t, e.name)]]
            k = r % len(live) if live else 0
            for e in live[k:] + live[:k]:
                try:
                    v = e.p50(feeds, args.warmup, iterations)
                except Exception as ex:  # e.g. the worker died under a peer
                    status[(t, e.name)] = f"FAILED: {ex}"
                    continue
                best[(t, e.name)] = min(v, best.get((t, e.name), float("inf")))
    for t in threads:
        for e in engines[t]:
            if isinstance(e, RemoteEngine):
                try:
                    e.free()
                except Exception:  # a dead worker has nothing left to free
                    pass
    rows = []
    for t in threads:
        row = {"model": name, "threads": t, "iterations": iterations}
        for eng in ["kite"] + peers.names:
            row[f"{eng}_p50_ms"] = best.get((t, eng))
            row[f"{eng}_status"] = (peers.unavailable.get(eng) and "unavailable: " + peers.unavailable[eng]) \
                or status.get((t, eng)) or "ok"
            if (t, eng) in notes:
                row[f"{eng}_note"] = notes[(t, eng)]
        k = best.get((t, "kite"))
        if k is not None and best.get((t, "ort")):
            row["ratio"] = k / best[(t, "ort")]
        timed = {e: best[(t, e)] for e in peers.timed() if (t, e) in best}
        if k is not None and timed:
            row["best_peer"] = min(timed, key=timed.get)
            row["ratio_best"] = k / timed[row["best_peer"]]
        rows.append(row)
    return rows, kite_path, feeds


def cell(row, eng):
    v = row[f"{eng}_p50_ms"]
    if v is not None:
        return f"{v:8.2f}*" if f"{eng}_note" in row else f"{v:9.2f}"
    st = row[f"{eng}_status"]
    return f"{'n/a' if st.startswith('unavailable') else st.split(':')[0]:>9}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True, help="folder with <model>.onnx files")
    ap.add_argument("--models", default=",".join(MODEL_SET),
                    help="comma-separated names (default: the model set)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--min-time-ms", type=float, default=50.0,
                    help="time at least this much a (threads, engine) pair and round: "
                         "more iterations for models faster than min-time / iterations")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="engines to compare Kite with, of " + ",".join(PEERS) +
                         " (default all; one that cannot be installed is reported, not timed)")
    ap.add_argument("--venv", default=os.path.join(HERE, ".venv-peers"),
                    help="virtual environment for MNN, ncnn and pnnx (made on first use)")
    ap.add_argument("--kite", choices=["auto", "python", "kite-run"], default="auto",
                    help="how to run Kite: its Python package in this process (python), "
                         "kite-run's own timer (kite-run), or python when it imports (auto)")
    ap.add_argument("--kite-python", default="",
                    help="folder to put first on sys.path to find the kite package")
    ap.add_argument("--check-binding", action="store_true",
                    help="with the package, also time kite-run and print its p50")
    ap.add_argument("--workdir", default="",
                    help="keep the converted models here (reused by later runs); default: a "
                         "temporary folder, removed at the end")
    ap.add_argument("--json", default="", help="write the results to this file")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    models = [m for m in args.models.split(",") if m]
    peer_names = [p for p in args.peers.split(",") if p]
    for p in peer_names:
        if p not in PEERS:
            sys.exit(f"unknown peer '{p}' (known: {', '.join(PEERS)})")

    ctx = argparse.Namespace()
    ctx.convert = find_tool(args.bin_dir, "kite-convert")
    ctx.run_tool = find_tool(args.bin_dir, "kite-run")
    kite_mod, why = (None, "--kite kite-run") if args.kite == "kite-run" else import_kite(args.kite_python)
    if kite_mod is None and args.kite == "python":
        sys.exit(f"the kite package does not import ({why}); build it (docs/PYTHON.md) or use --kite kite-run")
    ctx.kite_mod = kite_mod
    ctx.mode = "python package, in-process" if kite_mod else f"kite-run's own timer ({why})"
    ctx.work = args.workdir or tempfile.mkdtemp(prefix="kite-speed-")
    ctx.peer_dir = os.path.join(ctx.work, "peers")
    os.makedirs(ctx.peer_dir, exist_ok=True)
    ctx.peers = Peers(peer_names, args.venv, os.path.join(ctx.work, "peer_worker.log"))
    try:
        run_all(args, ctx, threads, models, peer_names)
    finally:
        if ctx.peers.worker:
            ctx.peers.worker.close()
        if not args.workdir:
            shutil.rmtree(ctx.work, ignore_errors=True)


def run_all(args, ctx, threads, models, peer_names):
    peers, kite_mod, mode = ctx.peers, ctx.kite_mod, ctx.mode
    cpu, isa, ncpu = describe_cpu()
    print(f"CPU: {cpu} ({ncpu} logical CPUs); ISA: {' '.join(isa)}")
    tool_dir = os.path.dirname(ctx.run_tool)
    latency_before = core_latency(tool_dir)
    print(f"{latency_before} (at the start; 2-thread times depend on it, docs/CPU.md)")
    version = subprocess.run([ctx.run_tool, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; Kite timed by: {mode}")
    print("peers: " + "; ".join(
        f"{p} {peers.versions[p]}" + (" (worker in the venv)" if p in REMOTE_PACKAGES else " (in-process)")
        if p not in peers.unavailable else f"{p} unavailable ({peers.unavailable[p]})"
        for p in peer_names))
    # The rule of backends/cpu/kernels/sgemm.cpp (builds before it have no avx512 kernel).
    cap = os.environ.get("KITE_CPU_SGEMM", "avx512")
    levels = [("avx512", "avx512f"), ("avx2", "avx2")]
    pick = next((lv for lv, flag in levels[[lv for lv, _ in levels].index(cap):] if flag in isa),
                "portable") if cap in ("avx512", "avx2") else "portable"
    print(f"Kite SGEMM kernel by its dispatch rule: {pick} (KITE_CPU_SGEMM={cap})")
    print(f"method: {args.rounds} rounds, engine order rotated per round, "
          f"{args.warmup} warmup + {args.iterations} timed runs (more where those take under "
          f"{args.min_time_ms:g} ms), smallest p50 (ms) kept")

    trivial = os.path.join(ctx.work, "relu_1x16.onnx")
    trivial_model(trivial)
    rows, _, _ = measure("relu_1x16", trivial, [1], ctx, args, max(args.iterations, 200))
    overhead = {e: rows[0][f"{e}_p50_ms"] for e in ["kite"] + peer_names}
    print("cost of one call (binding and fixed work), p50 of a single Relu on 1x16 at 1 thread, us: " +
          ", ".join(f"{e} {v * 1000:.1f}" if v is not None else f"{e}{cell(rows[0], e)}"
                    for e, v in overhead.items()))

    results = []
    best_col = "ort" in peer_names
    hdr = f"{'model':20} {'thr':>3} {'kite p50':>9}" + "".join(f" {p + ' p50':>9}" for p in peer_names)
    hdr += (f" {'kite/ort':>8}" if best_col else "") + f" {'kite/best':>9} {'best':>5}"
    if args.check_binding and kite_mod:
        hdr += f" {'kite-run p50':>12}"
    # Core-to-core latency (ns) just before and after each model's rounds:
    # the hypervisor moves the vCPUs between one core complex (~30) and two
    # (~200 and more) every few minutes, and 2-thread times follow it.
    hdr += f" {'c2c ns':>9}"
    print(hdr)
    for name in models:
        onnx_path = os.path.join(args.models_dir, name + ".onnx")
        if not os.path.exists(onnx_path):
            print(f"{name:20} missing: {onnx_path}")
            continue
        c2c_before = core_latency_ns(tool_dir)
        rows, kite_path, feeds = measure(name, onnx_path, threads, ctx, args, args.iterations)
        c2c = [c2c_before, core_latency_ns(tool_dir)]
        for row in rows:
            row["core_latency_ns"] = c2c
            t = row["threads"]
            line = f"{name:20} {t:3d} {cell(row, 'kite')}" + "".join(f" {cell(row, p)}" for p in peer_names)
            if best_col:
                line += f" {row['ratio']:8.2f}" if "ratio" in row else f" {'-':>8}"
            line += f" {row['ratio_best']:9.2f} {row['best_peer']:>5}" if "ratio_best" in row else f" {'-':>9} {'-':>5}"
            if args.check_binding and kite_mod and row["kite_p50_ms"] is not None:
                kr = KiteRunEngine(ctx.run_tool, kite_path, t, os.path.join(ctx.work, f"{name}-{t}"))
                os.makedirs(kr.workdir, exist_ok=True)
                row["kite_run_p50_ms"] = kr.p50(feeds, args.warmup, args.iterations)
                line += f" {row['kite_run_p50_ms']:12.2f}"
            line += " " + f"{'/'.join('?' if v is None else str(v) for v in c2c):>9}"
            print(line, flush=True)
        # Why an engine was not timed, once per model unless it differs by thread count.
        for eng in ["kite"] + peers.timed():
            whys = {}
            for row in rows:
                why = row.get(f"{eng}_note") or row[f"{eng}_status"]
                if why != "ok":
                    whys.setdefault(why, []).append(row["threads"])
            for why, ts in whys.items():
                at = "" if len(ts) == len(rows) else f" (at {','.join(map(str, ts))} threads)"
                print(f"    {eng}: {why[:300]}{at}")
        results += rows
    for key, label in (("ratio", "kite/ort"), ("ratio_best", "kite/best peer")):
        if key == "ratio" and not best_col:
            continue
        parts = []
        for t in threads:
            xs = [r[key] for r in results if r["threads"] == t and key in r]
            parts.append(f"{t} thread{'s' if t > 1 else ''} {geomean(xs):.2f} ({len(xs)} models)")
        print(f"geometric mean of {label}: " + ", ".join(parts))
    latency_after = core_latency(tool_dir)
    print(f"{latency_after} (at the end)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cpu": cpu, "isa": isa, "core_latency": [latency_before, latency_after], "kite_timing": mode, "peers": peers.versions,
                       "unavailable": peers.unavailable, "call_overhead_ms": overhead,
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
