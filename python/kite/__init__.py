"""Kite: convert ONNX models and run them, from Python.

    import numpy as np, kite
    report = kite.convert("model.onnx", "model.kite", input_shapes={"input": (1, 3, 224, 224)})
    m = kite.Model("model.kite")
    m.inputs            # [TensorInfo(name='input', shape=(1, 3, 224, 224), dtype=dtype('float32'))]
    s = m.session(backends=["vulkan", "cpu"], threads=2)
    out = s.run({"input": np.zeros((1, 3, 224, 224), np.float32)})   # {"output": ndarray}
    s.placement()       # which backend runs each node, and why

The package wraps Kite's C API (kite/kite.h) and the converter's
(kite/converter.h); docs/PYTHON.md describes it. Every failure raises
kite.Error (a RuntimeError) carrying Kite's message, e.g. which input has the
wrong shape and what shape the model expects.
"""
import json as _json
import os as _os
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _kite

Error = _kite.Error

__all__ = ["Error", "Model", "Session", "TensorInfo", "convert", "version", "__version__"]


def version() -> str:
    """The version of the Kite library this package loaded, e.g. "0.1.0"."""
    return _kite.version_string()


__version__ = _kite.VERSION_STRING

if _kite.version_string() != _kite.VERSION_STRING:  # pragma: no cover - a broken install
    raise ImportError(
        f"kite: the extension was built against Kite {_kite.VERSION_STRING} but loaded the "
        f"library {_kite.version_string()}; reinstall the package"
    )


class TensorInfo(NamedTuple):
    """One input or output of a model: its name, fixed shape and numpy dtype."""

    name: str
    shape: Tuple[int, ...]
    dtype: _np.dtype


def _infos(raw) -> List[TensorInfo]:
    return [TensorInfo(t["name"], tuple(t["shape"]), _np.dtype(t["dtype"])) for t in raw]


def convert(
    onnx_path,
    kite_path,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    opt_level: int = 2,
    report: bool = True,
    memory_budget: Union[int, str] = 0,
    inplace: bool = True,
    disabled_passes: Sequence[str] = (),
    precision: str = "fp32",
    fp16_tolerance: float = 1e-2,
    pack_for: str = "host",
) -> Optional[dict]:
    """Converts an ONNX file into a .kite file, like kite-convert.

    input_shapes fixes the shape of inputs whose dimensions are not static
    ({"input": (1, 3, 224, 224)}); opt_level is the optimizer level (0 none,
    1 folding and elimination, 2 also fusion); memory_budget > 0 keeps the
    activation arena within that many bytes, and a string such as "0.6x"
    within that ratio of the unbudgeted plan's lower bound (kite-convert
    --memory-budget; docs/MEMORY.md); inplace=False plans without
    in-place ops and views; disabled_passes names optimizer passes to skip;
    precision is "fp32", "fp16" or "mixed" (kite-convert --precision, with
    fp16_tolerance as --fp16-tolerance; docs/PRECISION.md); pack_for lists
    the ISA levels whose CPU kernels get the weights pre-packed in the file
    (kite-convert --pack-for: "x86-avx512,arm64-neon", "host", "none").
    The file is written atomically. Returns the conversion report as a dict
    (the JSON of kite-convert --report: nodes and kernel launches before and
    after, passes, fusions, ops, memory plan, weight and file bytes), or None
    when report is False.
    """
    budget_bytes, budget_ratio = 0, 0.0
    if isinstance(memory_budget, str):
        text = memory_budget.strip()
        if not text.lower().endswith("x"):
            raise ValueError(f"memory_budget {memory_budget!r}: expected bytes (int) or a ratio such as '0.6x'")
        try:
            budget_ratio = float(text[:-1])
        except ValueError:
            raise ValueError(f"memory_budget {memory_budget!r}: expected a ratio such as '0.6x'") from None
        if not budget_ratio > 0:
            raise ValueError(f"memory_budget {memory_budget!r}: the ratio must be > 0")
    else:
        budget_bytes = int(memory_budget)
    text = _kite.convert(
        _os.fspath(onnx_path),
        _os.fspath(kite_path),
        dict(input_shapes or {}),
        int(opt_level),
        bool(report),
        budget_bytes,
        budget_ratio,
        bool(inplace),
        [str(p) for p in disabled_passes],
        str(precision),
        float(fp16_tolerance),
        str(pack_for),
    )
    return None if text is None else _json.loads(text)


class Model:
    """A loaded, verified .kite model (memory-mapped; weights are not copied).

    A model is immutable: any number of threads may create sessions from it.
    """

    def __init__(self, path):
        self._model = _kite.Model(_os.fspath(path))
        self.inputs: List[TensorInfo] = _infos(self._model.inputs)
        self.outputs: List[TensorInfo] = _infos(self._model.outputs)

    @property
    def path(self) -> str:
        return self._model.path

    @property
    def producer(self) -> str:
        """The tool that wrote the file, e.g. "kite-convert 0.1.0"."""
        return self._model.producer

    @property
    def format_version(self) -> Tuple[int, int]:
        return tuple(self._model.format_version)

    def session(
        self,
        backends: Sequence[str] = ("cpu",),
        threads: int = 0,
        strict: bool = False,
        **options,
    ) -> "Session":
        """Creates a session: places every node on a backend and allocates memory once.

        backends is the preference list (a node runs on the first backend that
        supports it, the CPU takes the rest); threads is the number of CPU
        worker threads (0: one per core); strict=True turns any fallback into
        an error. More keyword options (see Session.OPTIONS): backend_path
        (folders searched first for plugins), memory_limit (bytes),
        poison (fill the arena with NaN before each run), backend_options
        ({backend: {key: value}}, e.g. {"cpu": {"fused": 0}}), device_index
        ({backend: index}), precision ("fp32" (default), or a list of
        "fp16_storage", "fp16_compute", "tf32"), cache_dir (a folder for
        compiled kernels), profile (True: per-node times, Session.profile()).
        """
        return Session(self, backends=backends, threads=threads, strict=strict, **options)

    def __repr__(self):
        return f"kite.Model({self.path!r}, inputs={self.inputs}, outputs={self.outputs})"


class Session:
    """Runs one model. Runs of one session are serialised (a lock); for
    parallel runs use one session per thread. The GIL is released while a
    run computes."""

    # keyword -> (SessionOptions setter, conversion). A new session option of
    # the C API is one setter in python/src/kite_module.cpp and one line here.
    OPTIONS = {
        "threads": ("set_threads", int),
        "strict": ("set_strict", bool),
        "backend_path": ("set_backend_path", lambda v: ":".join(map(_os.fspath, v))
                         if isinstance(v, (list, tuple)) else _os.fspath(v)),
        "memory_limit": ("set_memory_limit", int),
        "poison": ("set_poison", bool),
        "cache_dir": ("set_cache_dir", _os.fspath),
        "profile": ("set_profiling", bool),
        # Options that need more than one setter call: see _apply below.
        "backend_options": (None, None),
        "device_index": (None, None),
        "precision": (None, None),
    }

    PRECISION = {
        "fp16_storage": _kite.PRECISION_FP16_STORAGE,
        "fp16_compute": _kite.PRECISION_FP16_COMPUTE,
        "tf32": _kite.PRECISION_TF32,
    }

    @classmethod
    def _apply(cls, opts, key, value):
        if key == "backend_options":
            if not isinstance(value, Mapping):
                raise TypeError("session(): backend_options must map a backend name to "
                                "{key: value}, e.g. {'cpu': {'threads': 2}}")
            for backend, pairs in value.items():
                if not isinstance(pairs, Mapping):
                    raise TypeError(f"session(): backend_options[{backend!r}] must be a dict "
                                    "of option keys to values")
                for k, v in pairs.items():
                    if isinstance(v, bool):
                        v = int(v)
                    opts.set_backend_option(str(backend), str(k), str(_os.fspath(v)
                                            if isinstance(v, _os.PathLike) else v))
        elif key == "device_index":
            if not isinstance(value, Mapping):
                raise TypeError("session(): device_index must map a backend name to a "
                                "device index, e.g. {'vulkan': 1}")
            for backend, index in value.items():
                opts.set_device_index(str(backend), int(index))
        elif key == "precision":
            if isinstance(value, int) and not isinstance(value, bool):
                flags = value
            else:
                names = [value] if isinstance(value, str) else list(value)
                flags = 0
                for name in names:
                    if name == "fp32":
                        continue
                    if name not in cls.PRECISION:
                        raise ValueError(f"session(): unknown precision {name!r} (known: fp32, "
                                         + ", ".join(sorted(cls.PRECISION)) + ")")
                    flags |= cls.PRECISION[name]
            opts.set_precision(flags)
        else:
            setter, conv = cls.OPTIONS[key]
            getattr(opts, setter)(conv(value))

    def __init__(self, model: Model, backends: Sequence[str] = ("cpu",), **options):
        if isinstance(backends, str):
            backends = [b for b in backends.split(",") if b]
        opts = _kite.SessionOptions()
        opts.set_backends(",".join(backends))
        for key, value in options.items():
            if key not in self.OPTIONS:
                raise TypeError(
                    f"session(): unknown option {key!r} (options: backends, "
                    + ", ".join(sorted(self.OPTIONS)) + ")"
                )
            if value is None:
                continue
            self._apply(opts, key, value)
        self.model = model
        self._session = _kite.Session(model._model, opts)
        self.inputs: List[TensorInfo] = _infos(self._session.inputs)
        self.outputs: List[TensorInfo] = _infos(self._session.outputs)

    def run(self, inputs: Mapping[str, "_np.ndarray"]) -> Dict[str, "_np.ndarray"]:
        """Runs the model once. inputs maps every input name to a numpy array of
        exactly the input's dtype and shape (any memory layout; each is copied
        once into the session's memory). Returns {output name: new array}."""
        if not isinstance(inputs, dict):
            inputs = dict(inputs)
        return self._session.run(inputs)

    def placement(self) -> List[dict]:
        """Per node: {"node", "op", "backend", "fused", "decomposed", "reason"}."""
        return self._session.placement()

    def profile(self) -> List[dict]:
        """Per node: {"node", "op", "backend", "runs", "total_ns", "mean_ns",
        "measured"}; needs profile=True at session creation (otherwise runs is 0)."""
        return self._session.profile()

    @property
    def transfer_count(self) -> int:
        """Copies between host and device memory one run makes."""
        return self._session.transfer_count

    def __repr__(self):
        backends = sorted({p["backend"] for p in self.placement()})
        return f"kite.Session({self.model.path!r}, backends used: {backends})"
