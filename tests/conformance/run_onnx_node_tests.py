#!/usr/bin/env python3
# Python: the default python3 (pip onnx >= 1.13, numpy), which ships ONNX's backend node tests.
"""Run ONNX's backend node tests (the conformance suite) through kite-convert and kite-run.

Usage:
  tests/conformance/run_onnx_node_tests.py --kite-convert PATH --kite-run PATH
      --workdir DIR [--exclusions FILE] [--filter REGEX] [--jobs N] [-v]

Where the tests come from: onnx >= 1.23 builds them in memory
(onnx.backend.test.loader.load_model_tests(kind="node") returns TestCase
objects holding the ModelProto and its data sets); wheels up to 1.22 ship them
as files under onnx/backend/test/data/node/, which the same loader returns with
model_dir set. Either way each test is materialized under DIR/cases/<test>/ as
model.onnx, input_<k>.npy and expected_<k>.npy, then:
  kite-convert model.onnx -o DIR/runs/<test>/model.kite [--input-shape ...]
  kite-run model.kite --input NAME=input_<k>.npy ... --output-dir DIR/runs/<test>/out
and every expected output is compared with out/<sanitized output name>.npy.

Comparison (per output):
  float   |kite - expected| <= atol + rtol * |expected| element-wise, with the
          test's own rtol/atol (TestCase.rtol / .atol: 1e-3 / 1e-7 for every
          node test in onnx 1.23) -- exactly np.testing.assert_allclose as
          ONNX's backend runner (onnx.backend.test.runner.assert_similar_outputs)
          applies it. NaN must be NaN and +-Inf the same Inf, in the same places.
  int, bool  exact, and the dtype must match. This is stricter than ONNX's
          runner, which also applies rtol=1e-3 to integers: an index or a
          count that is off by one is a bug, never rounding.
  The shape must match exactly (a scalar is not a 1-element vector).

Verdicts, one line per test:
  PASS name
  FAIL name: reason
  SKIP name: op X not supported      -- the converter's importer does not know
          op X at all, or Kite has no CPU kernel for it (kite-convert refuses
          it with "no CPU kernel for op X"): the op is not in Kite's op list.
  SKIP name: excluded: reason        -- listed in the exclusions file (a real,
          documented limitation: a dtype Kite does not have, an attribute mode
          the issue does not ask for, ...). An excluded test still runs; if it
          passes, the line says the exclusion is stale, and --strict makes
          that a failure.
Final line, exactly: "N passed, N failed, N skipped". Exit code 1 if any test
failed (or with --strict, if an exclusion is stale or matches no test).

Exclusions file: one entry per line, "<test name or fnmatch pattern> <reason>"
(whitespace between); '#' starts a comment. Every entry needs a reason.
"""
import concurrent.futures
import fnmatch
import os
import re
import shutil
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kite_driver import check_tools, compare_array, run_tool, sanitize, tool_parser  # noqa: E402

try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"error: this script needs the onnx package ({e}); run it with the pip python3")


def short(text, width=600):
    text = " | ".join(l.strip() for l in text.strip().splitlines() if l.strip())
    return text if len(text) <= width else text[:width] + "..."


# ---- loading and materializing the tests -------------------------------------

def load_tests():
    """[(name, ModelProto, [inputs], [expected outputs], rtol, atol)] for every node test."""
    from onnx.backend.test import loader
    with warnings.catch_warnings():
        # Building the cases runs numpy reference code that warns on purpose
        # (overflowing casts, log(0)); those warnings are not ours.
        warnings.simplefilter("ignore")
        cases = loader.load_model_tests(kind="node")
    out = []
    for t in cases:
        rtol = getattr(t, "rtol", 1e-3)
        atol = getattr(t, "atol", 1e-7)
        if getattr(t, "model", None) is not None:
            data_sets = getattr(t, "data_sets", None) or []
            model = t.model
        else:
            # Wheels up to 1.22: model.onnx + test_data_set_*/{input,output}_*.pb on disk.
            model = onnx.load(os.path.join(t.model_dir, "model.onnx"))
            data_sets = []
            for ds in sorted(d for d in os.listdir(t.model_dir) if d.startswith("test_data_set_")):
                ds_dir = os.path.join(t.model_dir, ds)
                def read(prefix):
                    files = sorted((f for f in os.listdir(ds_dir) if f.startswith(prefix)),
                                   key=lambda f: int(re.findall(r"\d+", f)[-1]))
                    vals = []
                    for f in files:
                        tp = onnx.TensorProto()
                        with open(os.path.join(ds_dir, f), "rb") as fh:
                            tp.ParseFromString(fh.read())
                        vals.append(numpy_helper.to_array(tp))
                    return vals
                data_sets.append((read("input_"), read("output_")))
        if not data_sets:
            out.append((t.name, model, None, None, rtol, atol))
            continue
        inputs, outputs = data_sets[0]
        out.append((t.name, model, list(inputs), list(outputs), rtol, atol))
    return out


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


KITE_NP_DTYPES = {np.dtype(t) for t in (np.float32, np.float16, np.int64, np.int32, np.int8,
                                         np.uint8, np.bool_)}


def as_array(v):
    """The value as a numpy array Kite can read, or None (sequence, optional, string, ...)."""
    if isinstance(v, onnx.TensorProto):
        try:
            v = numpy_helper.to_array(v)
        except Exception:
            return None
    if isinstance(v, np.generic):
        v = np.asarray(v)
    if not isinstance(v, np.ndarray):
        return None
    return v


def describe(v):
    if isinstance(v, onnx.TensorProto):
        return f"a {onnx.TensorProto.DataType.Name(v.data_type)} TensorProto"
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} tensor"
    return f"a {type(v).__name__}"


def materialize(case_dir, model, inputs, outputs):
    """Writes model.onnx, input_<k>.npy, expected_<k>.npy. Returns the reasons why some
    value could not be written as .npy (a sequence, an optional, a string or float8
    tensor): the converter is still run, and must refuse such a model."""
    os.makedirs(case_dir, exist_ok=True)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    problems = []
    for prefix, values in (("input", inputs), ("expected", outputs)):
        for k, v in enumerate(values):
            a = as_array(v)
            if a is None or a.dtype not in KITE_NP_DTYPES:
                problems.append(f"{prefix} {k} is {describe(v)}, which Kite cannot take")
                continue
            np.save(os.path.join(case_dir, f"{prefix}_{k}.npy"), a)
    return problems


# ---- exclusions -------------------------------------------------------------

def read_exclusions(path):
    entries = []  # (pattern, reason, line number)
    if not path:
        return entries
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2 or not parts[1].strip():
                sys.exit(f"error: {path}:{lineno}: '{parts[0]}' has no reason")
            entries.append((parts[0], parts[1].strip(), lineno))
    return entries


def find_exclusion(name, entries):
    for pattern, reason, lineno in entries:
        if pattern == name or fnmatch.fnmatchcase(name, pattern):
            return pattern, reason, lineno
    return None


# ---- comparing ----------------------------------------------------------------

# ---- one test -----------------------------------------------------------------

UNKNOWN_OP_RE = re.compile(r"op '([^']+)' \(domain '([^']*)', opset \d+\) is not supported")
NO_KERNEL_RE = re.compile(r"no CPU kernel for op (\S+)")


def unsupported_ops(message):
    """Ops the converter says Kite does not have at all (importer list, or no CPU kernel)."""
    ops = []
    for op, domain in UNKNOWN_OP_RE.findall(message):
        ops.append(op if domain in ("ai.onnx", "") else f"{domain}.{op}")
    ops += NO_KERNEL_RE.findall(message)
    return sorted(set(ops))


def refused_nodes(message):
    """Number of refused nodes a converter message lists (its first line says how many)."""
    m = re.search(r"(\d+) node\(s\)", message)
    return int(m.group(1)) if m else None


NEEDS_CONSTANT_RE = re.compile(r"input '([^']+)' (?:value must be known at convert time|"
                               r"must be a constant)")


def graph_input_ancestors(model, tensor):
    """Graph inputs (by name) whose values flow into tensor through the main graph."""
    producer = {}
    for node in model.graph.node:
        for o in node.output:
            producer[o] = node
    names = {vi.name for vi in graph_inputs(model)}
    seen, todo, found = set(), [tensor], []
    while todo:
        t = todo.pop()
        if t in seen or not t:
            continue
        seen.add(t)
        if t in names:
            found.append(t)
        elif t in producer:
            todo.extend(producer[t].input)
    return found


def bake_inputs(model, names, values):
    """A copy of model where the graph inputs `names` are initializers holding `values`."""
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    keep = [vi for vi in baked.graph.input if vi.name not in names]
    del baked.graph.input[:]
    baked.graph.input.extend(keep)
    for n in names:
        baked.graph.initializer.append(numpy_helper.from_array(values[n], n))
    return baked


def run_case(case, args):
    """Returns (verdict, detail): verdict in PASS, FAIL, UNSUPPORTED."""
    name, model_path, in_files, exp_files, problems, rtol, atol = case
    run_dir = os.path.join(args.workdir, "runs", name)
    out_dir = os.path.join(run_dir, "out")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(out_dir)
    model = onnx.load(model_path)
    # Node tests may omit trailing optional inputs from the data set.
    ins = graph_inputs(model)[:len(in_files)]
    values = {vi.name: np.load(f) for vi, f in zip(ins, in_files) if f}
    kite_file = os.path.join(run_dir, "model.kite")

    # Kite fixes every shape at convert time, so an input that decides a shape
    # (Reshape's shape, Split's sizes, Resize's scales, a Reduce's axes) must
    # be a constant. Node tests feed such values as graph inputs; when the
    # converter says it needs one, the test's value is baked into the model as
    # an initializer and the conversion is retried. Baked: the graph input the
    # converter names, or, when it names a computed tensor, the integer graph
    # inputs that tensor is computed from (never the float data inputs).
    baked = []
    convert_path = model_path
    while True:
        convert = [args.kite_convert, convert_path, "-o", kite_file, "-q"]
        for vi in ins:
            if vi.name in baked or vi.name not in values:
                continue
            arr = values[vi.name]
            tt = vi.type.tensor_type
            symbolic = (not tt.HasField("shape")) or \
                any(not d.HasField("dim_value") for d in tt.shape.dim)
            if symbolic and arr.ndim > 0:
                convert += ["--input-shape", f"{vi.name}={'x'.join(str(d) for d in arr.shape)}"]
        rc, so, se = run_tool(convert, args.timeout)
        msg = se or so
        if rc == 0:
            break
        wanted = []
        for t in NEEDS_CONSTANT_RE.findall(msg):
            if t in values:
                found = [t]
            else:
                found = [n for n in graph_input_ancestors(model, t)
                         if n in values and np.issubdtype(values[n].dtype, np.integer)]
            wanted += [n for n in found if n not in baked and n not in wanted]
        if not wanted:
            break
        baked += wanted
        convert_path = os.path.join(run_dir, "model_baked.onnx")
        onnx.save(bake_inputs(model, baked, values), convert_path)
    note = f" (baked as constants: {', '.join(baked)})" if baked else ""
    if rc != 0:
        ops = unsupported_ops(msg)
        n_refused = refused_nodes(msg)
        # "Not supported at all" only when every refused node is such an op.
        if ops and (n_refused is None or n_refused == len(UNKNOWN_OP_RE.findall(msg)) +
                    len(NO_KERNEL_RE.findall(msg))):
            return "UNSUPPORTED", ", ".join(ops)
        return "FAIL", f"kite-convert exited {rc}{note}: {short(msg)}"
    if problems:
        return "FAIL", "kite-convert accepted the model, but " + "; ".join(problems)

    run = [args.kite_run, kite_file, "--output-dir", out_dir, "--quiet",
           "--threads", str(args.threads)]
    for vi, f in zip(ins, in_files):
        if vi.name not in baked:
            run += ["--input", f"{vi.name}={f}"]
    rc, so, se = run_tool(run, args.timeout)
    if rc != 0:
        return "FAIL", f"kite-run exited {rc}{note}: {short(se or so)}"
    problems = []
    for out_vi, f in zip(model.graph.output, exp_files):
        exp = np.load(f)
        path = os.path.join(out_dir, sanitize(out_vi.name) + ".npy")
        if not os.path.exists(path):
            problems.append(f"kite-run wrote no output '{out_vi.name}'")
            continue
        why = compare_array(out_vi.name, exp, np.load(path), atol, rtol)
        if why:
            problems.append(why)
    if len(exp_files) != len(model.graph.output):
        problems.append(f"{len(exp_files)} expected outputs for {len(model.graph.output)} "
                        "graph outputs")
    if problems:
        return "FAIL", "; ".join(problems) + note
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return "PASS", note.strip()


def main():
    ap = tool_parser(__doc__, timeout=120)
    ap.add_argument("--exclusions", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "exclusions.txt"))
    ap.add_argument("--filter", default=None, help="only tests whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=2, help="tests run in parallel (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="kite-run --threads (default 1)")
    ap.add_argument("--strict", action="store_true",
                    help="fail on exclusions that are stale (the test passes) or match no test")
    ap.add_argument("--keep", action="store_true", help="keep the work files of passing tests")
    ap.add_argument("-v", "--verbose", action="store_true", help="print timing")
    args = ap.parse_args()
    check_tools(args.kite_convert, args.kite_run)
    args.workdir = os.path.abspath(args.workdir)
    exclusions = read_exclusions(args.exclusions)

    t0 = time.time()
    tests = load_tests()
    if args.filter:
        rx = re.compile(args.filter)
        tests = [t for t in tests if rx.search(t[0])]
    tests.sort(key=lambda t: t[0])
    cases_dir = os.path.join(args.workdir, "cases")
    shutil.rmtree(cases_dir, ignore_errors=True)
    shutil.rmtree(os.path.join(args.workdir, "runs"), ignore_errors=True)

    verdicts = {}  # name -> (kind, text)
    runnable = []
    for name, model, inputs, outputs, rtol, atol in tests:
        if inputs is None:
            verdicts[name] = ("FAIL", "the test has no data set")
            continue
        case_dir = os.path.join(cases_dir, name)
        problems = materialize(case_dir, model, inputs, outputs)

        def npy(prefix, k):
            f = os.path.join(case_dir, f"{prefix}_{k}.npy")
            return f if os.path.exists(f) else None
        runnable.append((name, os.path.join(case_dir, "model.onnx"),
                         [npy("input", k) for k in range(len(inputs))],
                         [npy("expected", k) for k in range(len(outputs))],
                         problems, rtol, atol))
    if args.verbose:
        print(f"# {len(tests)} tests materialized in {time.time() - t0:.1f}s", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_case, c, args): c[0] for c in runnable}
        for fut in concurrent.futures.as_completed(futures):
            name = futures[fut]
            try:
                verdicts[name] = fut.result()
            except Exception as e:  # a driver bug must not pass silently
                verdicts[name] = ("FAIL", f"driver error: {type(e).__name__}: {e}")

    passed = failed = skipped = 0
    stale, used = [], set()
    for name in sorted(verdicts):
        kind, text = verdicts[name]
        excl = find_exclusion(name, exclusions)
        if excl:
            used.add(excl[2])
        if kind == "UNSUPPORTED":
            print(f"SKIP {name}: op {text} not supported")
            skipped += 1
        elif excl:
            note = ""
            if kind == "PASS":
                note = " (stale: the test passes now)"
                stale.append(name)
            print(f"SKIP {name}: excluded: {excl[1]}{note}")
            skipped += 1
        elif kind == "PASS":
            print(f"PASS {name}{' ' + text if text else ''}")
            passed += 1
        else:
            print(f"FAIL {name}: {text}")
            failed += 1
    unused = [(p, n) for p, _, n in exclusions if n not in used]
    if not args.filter:
        for pattern, lineno in unused:
            print(f"# note: exclusion '{pattern}' (line {lineno}) matches no test")
    for name in stale:
        print(f"# note: {name} is excluded but passes; remove its exclusion")
    if args.verbose:
        print(f"# {time.time() - t0:.1f}s in all", flush=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    bad_exclusions = bool(stale) or (bool(unused) and not args.filter)
    return 1 if failed or (args.strict and bad_exclusions) else 0


if __name__ == "__main__":
    sys.exit(main())
