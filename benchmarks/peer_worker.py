#!/usr/bin/env python3
# Python: the benchmarks' peer venv (benchmarks/speed.py --venv), which has
# PyPI `mnn` and `ncnn`; started by speed.py, not by hand.
"""The MNN and ncnn side of benchmarks/speed.py: a worker process in the
virtual environment that has those packages (they cannot share speed.py's
interpreter: see its docstring), timed by the same harness as the engines in
speed.py's own process (bench_common.time_calls: wall clock around one call
that takes the inputs and returns new output arrays).

Protocol: one JSON object a line on stdin, one answer a line on the stdout
this process started with (the engines' own prints go to stderr):
  {"op": "load", "engine": "mnn"|"ncnn", "path": P, "threads": T,
   "inputs": [names], "outputs": [names]}        -> {"id": N}
  {"op": "run", "id": N, "feeds": NPZ, "out": NPZ} -> {}  (outputs in NPZ)
  {"op": "p50", "id": N, "feeds": NPZ, "warmup": W, "iterations": I} -> {"p50": ms}
  {"op": "free", "id": N}                          -> {}
Any answer may be {"error": "..."} instead. The first line it writes says
which engines import: {"available": {"mnn": "3.x" | null, ...}, "why": {...}}.
Feeds are .npz files keyed by the model's input names (ONNX order).
"""
import json
import os
import sys

# MNN prints to stdout (C printf) when it loads: keep the protocol's stdout apart.
PROTOCOL = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

import numpy as np  # noqa: E402

from bench_common import time_calls  # noqa: E402

ENGINES = {}
WHY = {}
try:
    import MNN
    import MNN.expr as mnn_expr
    import MNN.nn as mnn_nn
    ENGINES["mnn"] = MNN.version()
except Exception as e:  # ImportError, or a broken wheel's error
    WHY["mnn"] = f"{type(e).__name__}: {e}"
try:
    import ncnn
    ENGINES["ncnn"] = getattr(ncnn, "__version__", "?")
except Exception as e:
    WHY["ncnn"] = f"{type(e).__name__}: {e}"


class MnnEngine:
    """MNN's Module API on its CPU backend, fp32 ("precision": "high"; the
    x86 wheels have no fp16 arithmetic anyway). Integer inputs go in as
    int32, which is what mnnconvert makes of ONNX int64."""

    def __init__(self, path, threads, inputs, outputs):
        rt = mnn_nn.create_runtime_manager(({"backend": "CPU", "numThread": threads,
                                             "precision": "high"},))
        self.m = mnn_nn.load_module_from_file(path, inputs, outputs, runtime_manager=rt)
        self.inputs, self.outputs = inputs, outputs

    def call(self, feeds):
        xs = []
        for name in self.inputs:
            x = feeds[name]
            if np.issubdtype(x.dtype, np.integer):
                xs.append(mnn_expr.const(x.astype(np.int32), list(x.shape), mnn_expr.NCHW, mnn_expr.int))
            else:
                xs.append(mnn_expr.const(x.astype(np.float32), list(x.shape), mnn_expr.NCHW, mnn_expr.float))
        ys = self.m.forward(xs)
        return {n: np.array(mnn_expr.convert(y, mnn_expr.NCHW).read()) for n, y in zip(self.outputs, ys)}


class NcnnEngine:
    """ncnn.Net on the CPU in fp32: Vulkan, fp16, bf16 and int8 off. pnnx
    names the blobs in0.. and out0.. in the ONNX graph's order; the batch
    dimension maps to ncnn's with batch_index=0. Integer inputs go in as
    int32 (pnnx's Embed reads them so)."""

    OFF = ["use_vulkan_compute", "use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic",
           "use_bf16_storage", "use_int8_inference", "use_int8_packed", "use_int8_storage",
           "use_int8_arithmetic"]

    def __init__(self, path, threads, inputs, outputs):
        self.net = ncnn.Net()
        for opt in self.OFF:
            if hasattr(self.net.opt, opt):
                setattr(self.net.opt, opt, False)
        self.net.opt.num_threads = threads
        binary = path[:-len(".param")] + ".bin"
        if self.net.load_param(path) != 0 or self.net.load_model(binary) != 0:
            raise RuntimeError("ncnn cannot load the model")
        self.inputs, self.outputs = inputs, outputs

    def call(self, feeds):
        ex = self.net.create_extractor()
        for i, name in enumerate(self.inputs):
            x = feeds[name]
            x = x.astype(np.int32) if np.issubdtype(x.dtype, np.integer) else x.astype(np.float32)
            ex.input(f"in{i}", ncnn.Mat(x, batch_index=0))
        out = {}
        for i, name in enumerate(self.outputs):
            ret, y = ex.extract(f"out{i}")
            if ret != 0:
                raise RuntimeError(f"ncnn extract out{i} returned {ret}")
            out[name] = np.array(y.numpy(batch_index=0))
        return out


KINDS = {"mnn": MnnEngine, "ncnn": NcnnEngine}


def load_feeds(path, cache={}):
    if path not in cache:
        cache.clear()
        with np.load(path) as z:
            cache[path] = {k: z[k] for k in z.files}
    return cache[path]


def answer(req, sessions):
    op = req["op"]
    if op == "load":
        sessions[len(sessions) + 1] = KINDS[req["engine"]](req["path"], req["threads"],
                                                        req["inputs"], req["outputs"])
        return {"id": len(sessions)}
    s = sessions[req["id"]]
    if op == "run":
        np.savez(req["out"], **s.call(load_feeds(req["feeds"])))
        return {}
    if op == "p50":
        feeds = load_feeds(req["feeds"])
        return {"p50": time_calls(lambda: s.call(feeds), req["warmup"], req["iterations"])}
    if op == "free":
        sessions[req["id"]] = None
        return {}
    raise ValueError(f"unknown op {op}")


def main():
    PROTOCOL.write(json.dumps({"available": ENGINES, "why": WHY}) + "\n")
    PROTOCOL.flush()
    sessions = {}
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line), sessions)
        except Exception as e:  # a model an engine cannot load or run
            reply = {"error": f"{type(e).__name__}: {e}"[:400]}
        PROTOCOL.write(json.dumps(reply) + "\n")
        PROTOCOL.flush()


if __name__ == "__main__":
    main()
