"""calq from Python: load a model, run it on numpy arrays, calibrate it from numpy batches and
save the quantized models (docs/python.md).

Pure Python over ctypes: nothing to compile. The library is libcalq.so, found through the
CALQ_LIBRARY environment variable (a path), else the build folder of the checkout this package
sits in (build/libcalq.so), else the system's loader path.

Every failure raises calq.Error, carrying the library's status code (.status, .status_name), the
layer involved (.layer, or "") and its message (what, where, why, what to do)."""
import collections
import collections.abc
import json
import os
import shutil
import tempfile

import numpy as np

from . import _capi
from ._capi import ctypes

__all__ = ["Error", "Model", "Value", "CalibrationResult", "version", "load", "calibrate", "save", "compare",
           "set_log"]

_lib = None


def _L():
    global _lib
    if _lib is None:
        _lib = _capi.load_library()
    return _lib


class Error(Exception):
    """A calq failure: .status (the calq_status value, e.g. -65530), .status_name ("BAD_PARAMETERS"),
    .layer (the layer or node involved, or "") and .message."""

    def __init__(self, status, message, layer=""):
        super().__init__(message)
        self.status = int(status)
        self.message = message
        self.layer = layer or ""
        try:
            self.status_name = _L().calq_status_name(self.status).decode()
        except OSError:
            self.status_name = str(self.status)

    def __str__(self):
        return "%s (%s%s)" % (self.message, self.status_name, ", layer " + self.layer if self.layer else "")


def _raise(st, err):
    raise Error(st, err.message.decode("utf-8", "replace"), err.layer.decode("utf-8", "replace"))


def _check(st, err):
    if st != _capi.CALQ_OK:
        _raise(st, err)


def _b(s):
    return None if s is None else os.fsencode(s)


# Arguments of the wrong type (None for a path, a number for a name, something else than a Model)
# raise TypeError naming the argument here, before ctypes turns them into a NULL pointer the
# library has to refuse or an AttributeError from deep inside this module; wrong values of the
# right type stay calq.Error (BAD_PARAMETERS), as the library's own checks.
def _path(value, what, optional=False):
    """A path argument (str, bytes or os.PathLike) as a str (os.fsdecode: _b gives the same bytes
    back); None when optional."""
    if value is None and optional:
        return None
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise TypeError("%s must be a path (str, bytes or os.PathLike)%s, not %s" % (
            what, " or None" if optional else "", type(value).__name__)) from None


def _text(value, what, optional=False):
    """A name argument (str) ; None when optional."""
    if (value is None and optional) or isinstance(value, str):
        return value
    raise TypeError("%s must be a str%s, not %s" % (what, " or None" if optional else "", type(value).__name__))


def _model(value, what):
    if not isinstance(value, Model):
        raise TypeError("%s must be a calq.Model (calq.load), not %s" % (what, type(value).__name__))
    return value


_INT_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _whole(value, what, lo, hi):
    """value (an integer, or a float holding one) as an int in [lo, hi], the range of the C field
    it goes to: ctypes stores a Python int in a C int or int64_t modulo 2**32 or 2**64 without a
    word (batch_num=2**32 + 1 calibrated 1 batch), and int() cuts 1.7 to 1."""
    try:
        v = int(value)
        whole = v == value
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "%s must be an integer, not %r" % (what, value))
    if not lo <= v <= hi:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "%s is %d; it must be in [%d, %d]" % (what, v, lo, hi))
    return v


# calq_dtype <-> numpy, in calq.h's enum order (CALQ_DTYPE_UNDEFINED = 0 has no numpy type)
_DTYPES = [None, np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
           np.int64, np.uint64, np.bool_]
_TO_CALQ = {np.dtype(t): i for i, t in enumerate(_DTYPES) if t is not None}


def _np_dtype(code):
    t = _DTYPES[code] if 0 <= code < len(_DTYPES) else None
    return None if t is None else np.dtype(t)


def version():
    """The version of the libcalq that runs, "MAJOR.MINOR.PATCH"."""
    return _L().calq_version_string().decode()


_LEVELS = {1: "warning", 2: "info", 3: "debug"}
_log_keep = None  # the installed ctypes callback (it must outlive its use by the library)


def set_log(fn, level="info"):
    """Sends the library's messages (AMCT's calibration progress, notes, warnings, the files
    written) to fn(level, message), level one of "warning", "info", "debug"; messages above
    `level` are not produced. fn None (the default state) silences the library. One setting for
    the whole process. An exception in fn is printed by ctypes and otherwise ignored."""
    global _log_keep
    if fn is not None and not callable(fn):
        raise TypeError("fn must be a callable fn(level, message) or None, not %s" % type(fn).__name__)
    want = {v: k for k, v in _LEVELS.items()}.get(_text(level, "level"))
    if want is None:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "level must be 'warning', 'info' or 'debug', not %r" % (level,))
    if fn is None:
        cb = ctypes.cast(None, _capi.LOG_FN)
    else:
        def cb_(user, lv, message):
            fn(_LEVELS.get(lv, str(lv)), message.decode("utf-8", "replace"))
        cb = _capi.LOG_FN(cb_)
    _L().calq_set_log(cb, None, want)
    _log_keep = cb  # the previous callback is no longer called once calq_set_log has returned


Value = collections.namedtuple("Value", "name shape dtype")
Value.__doc__ = """A model input or output: name, shape (a tuple, None for a dynamic dim) and dtype (a
numpy dtype, or None when the model does not say)."""


def _value(v):
    shape = tuple(None if v.dims[k] < 0 else int(v.dims[k]) for k in range(v.ndim)) if v.ndim >= 0 else None
    return Value(v.name.decode(), shape, _np_dtype(v.dtype))


class Model:
    """A loaded model (calq.load). run() executes it; calq.calibrate() and calq.save() quantize it.
    close() (or a with block) frees it at once; otherwise it is freed with the object."""

    def __init__(self, ptr, path, weights):
        self._ptr = ptr
        self._session = None
        self.path = path
        self.weights = weights

    def _handle(self):
        if not self._ptr:
            raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "the model was closed")
        return self._ptr

    def close(self):
        lib = _lib
        if lib is None:
            return
        if self._session:
            lib.calq_session_free(self._session)
            self._session = None
        if self._ptr:
            lib.calq_model_free(self._ptr)
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _infos(self, count, info):
        lib, h = _L(), self._handle()
        out = []
        for i in range(count(h)):
            v = _capi.ValueInfo()
            info(h, i, ctypes.byref(v))
            out.append(_value(v))
        return out

    @property
    def inputs(self):
        """The graph inputs, in the model's order (list of calq.Value)."""
        return self._infos(_L().calq_model_num_inputs, _L().calq_model_input_info)

    @property
    def outputs(self):
        """The graph outputs, in the model's order (list of calq.Value); shapes as the model
        declares them (a run gives the actual ones)."""
        return self._infos(_L().calq_model_num_outputs, _L().calq_model_output_info)

    def set_input_shape(self, name, shape):
        """Fixes the shape of input `name` (every dim concrete), e.g. the batch size."""
        lib, err = _L(), _capi.Error_()
        _text(name, "set_input_shape: name")
        if not isinstance(shape, collections.abc.Iterable) or isinstance(shape, (str, bytes)):
            raise TypeError("set_input_shape: shape must be a sequence of ints, not %s" % type(shape).__name__)
        shape = list(shape)
        want = [_whole(d, "input '%s': dim %d" % (name, k), -_INT64_MAX - 1, _INT64_MAX) for k, d in enumerate(shape)]
        dims = (ctypes.c_int64 * max(len(want), 1))(*want)
        _check(lib.calq_model_set_input_shape(self._handle(), _b(name), dims, len(shape), ctypes.byref(err)), err)

    def run(self, feeds):
        """Runs the model once: feeds maps every input name to a numpy array (float arrays are
        converted to the input's float type; shapes may change between runs). Returns a dict
        output name -> numpy array (copies, owned by the caller)."""
        lib, h = _L(), self._handle()
        ins = self.inputs
        if not isinstance(feeds, collections.abc.Mapping):  # a list of arrays, an array: no names
            raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                        "run: feeds must be a dict of input name -> array; the model's inputs are %s" %
                        ", ".join(repr(v.name) for v in ins))
        unknown = sorted(set(feeds) - {v.name for v in ins})
        missing = [v.name for v in ins if v.name not in feeds]
        if unknown or missing:
            raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                        "run: the model's inputs are %s; %s" % (
                            ", ".join(repr(v.name) for v in ins),
                            "missing " + ", ".join(map(repr, missing)) if missing else
                            "unknown " + ", ".join(map(repr, unknown))))
        err = _capi.Error_()
        if not self._session:
            s = ctypes.c_void_p()
            _check(lib.calq_session_create(h, None, ctypes.byref(s), ctypes.byref(err)), err)
            self._session = s
        tensors = (_capi.Tensor * len(ins))()
        keep = []
        for i, v in enumerate(ins):
            want = v.dtype or np.dtype(np.float32)
            a = np.asarray(feeds[v.name])
            if a.dtype != want:
                if not (a.dtype.kind == "f" and want.kind == "f"):
                    raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                                "run: input '%s' takes %s, not %s" % (v.name, want, a.dtype))
            a = np.ascontiguousarray(a, dtype=want)
            _fill(tensors[i], a, "input '%s'" % v.name)
            keep.append(a)
        _check(lib.calq_session_run(self._session, tensors, len(ins), ctypes.byref(err)), err)
        out = {}
        for i, v in enumerate(self.outputs):
            t = ctypes.POINTER(_capi.Tensor)()
            st = lib.calq_session_output(self._session, i, ctypes.byref(t))
            if st != _capi.CALQ_OK:
                raise Error(st, "run: no output %d ('%s') after the run" % (i, v.name))
            out[v.name] = _to_numpy(t.contents)
        return out


def _fill(t, a, what):
    if a.ndim > _capi.MAX_DIMS:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "%s has %d dims; calq takes at most %d" % (what, a.ndim,
                                                                                             _capi.MAX_DIMS))
    code = _TO_CALQ.get(a.dtype)
    if code is None:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "%s is a %s array; calq takes %s" % (
            what, a.dtype, ", ".join(str(np.dtype(d)) for d in _DTYPES[1:])))
    t.dtype = code
    t.ndim = a.ndim
    for k, d in enumerate(a.shape):
        t.dims[k] = d
    t.data = a.ctypes.data if a.size else None


def _to_numpy(t):
    dt = _np_dtype(t.dtype)
    shape = tuple(int(t.dims[k]) for k in range(t.ndim))
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dt is None or n == 0 or not t.data:
        return np.zeros(shape, dtype=dt or np.float32)
    buf = (ctypes.c_char * (n * dt.itemsize)).from_address(t.data)
    return np.frombuffer(buf, dtype=dt).reshape(shape).copy()


def load(path, weights=None, input_shape=None):
    """Loads an ONNX model (path), or a Caffe model (path: the .prototxt, weights: the
    .caffemodel). input_shape: a dict input name -> tuple fixing input shapes (e.g. a dynamic
    batch dim), as the CLI's --input_shape."""
    lib, err, ptr = _L(), _capi.Error_(), ctypes.c_void_p()
    path = _path(path, "load: path")
    weights = _path(weights, "load: weights", optional=True)
    if input_shape is not None and not isinstance(input_shape, collections.abc.Mapping):
        raise TypeError("load: input_shape must be a dict input name -> shape, not %s" % type(input_shape).__name__)
    caffe = weights is not None or _b(path).endswith(b".prototxt")
    if caffe:
        st = lib.calq_model_load_caffe(_b(path), _b(weights), ctypes.byref(ptr), ctypes.byref(err))
    else:
        st = lib.calq_model_load_onnx(_b(path), ctypes.byref(ptr), ctypes.byref(err))
    _check(st, err)
    m = Model(ptr, path, weights)
    try:
        for name, shape in (input_shape or {}).items():
            m.set_input_shape(name, shape)
    except BaseException:
        m.close()
        raise
    return m


# ---- save formats (the CLI's --format and --save_type, docs/cli.md "calq save") -------------------
_QDQ, _QOP, _FAKE, _DEPLOY = 0, 1, 2, 3  # calq_save_format
_FORMAT_WORDS = {"ascend": (_FAKE, _DEPLOY), "qdq": (_QDQ,), "qoperator": (_QOP,), "both": (_QDQ, _QOP),
                 "all": (_FAKE, _DEPLOY, _QDQ, _QOP)}
_SAVE_TYPES = {"both": (True, True), "fakequant": (True, False), "deploy": (False, True), "none": (False, False)}
_FORMAT_NAMES = {_QDQ: "qdq", _QOP: "qoperator", _FAKE: "ascend fake-quant", _DEPLOY: "ascend deploy"}


def _formats(formats, save_type, caffe):
    """-> (list of calq_save_format, chosen): chosen when the caller named the formats (then each
    must be written); else the model's defaults, the ones it does not allow being skipped."""
    kinds = _SAVE_TYPES.get(str(save_type).lower())
    if kinds is None:
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                    "save_type must be Both, Fakequant, Deploy or None, not %r" % (save_type,))
    if formats is not None and not isinstance(formats, (str, collections.abc.Iterable)):
        raise TypeError("formats must be a comma-separated str or a list of format names, not %s" %
                        type(formats).__name__)
    chosen = formats is not None
    words = ["ascend" if caffe else "all"] if formats is None else (
        formats.split(",") if isinstance(formats, str) else list(formats))
    allf = []
    for w in words:
        fs = _FORMAT_WORDS.get(str(w).strip().lower())
        if fs is None:
            raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                        "formats take ascend, qdq, qoperator, both (qdq and qoperator) or all, not %r" % (w,))
        allf += [f for f in fs if f not in allf]
    if caffe and (_QDQ in allf or _QOP in allf):
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "a Caffe model is saved as AMCT's Caffe models (formats "
                    "['ascend']); QDQ and QOperator are ONNX formats")
    fake, deploy = kinds
    out = [f for f in allf if (fake if f in (_FAKE, _QDQ) else deploy)]
    if not out and (fake or deploy):
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS,
                    "save_type %s keeps none of the formats %s: qdq and the ascend fake-quant model are the "
                    "Fakequant kind, qoperator and the ascend deploy model the Deploy kind" % (save_type, words))
    return out, chosen


def _save(lib, m, record, config, fmts, chosen, prefix, outputs):
    err = _capi.Error_()
    arr = (ctypes.c_int * max(len(fmts), 1))(*fmts)
    skipped = (_capi.SaveSkip * 4)()
    n_skipped = ctypes.c_int(0)
    if outputs:
        st = lib.calq_save_models_staged(outputs, m, _b(record), _b(config), arr, len(fmts), _b(prefix),
                                         None if chosen else skipped, None if chosen else ctypes.byref(n_skipped),
                                         ctypes.byref(err))
    elif chosen:
        st = lib.calq_save_models(m, _b(record), _b(config), arr, len(fmts), _b(prefix), ctypes.byref(err))
    else:
        st = lib.calq_save_models_available(m, _b(record), _b(config), arr, len(fmts), _b(prefix), skipped,
                                            ctypes.byref(n_skipped), ctypes.byref(err))
    _check(st, err)
    return [(_FORMAT_NAMES.get(skipped[i].format & ~_REDUCE_RANGE, "?"), skipped[i].reason.decode("utf-8", "replace"))
            for i in range(n_skipped.value)]


_REDUCE_RANGE = 0x100  # CALQ_SAVE_REDUCE_RANGE


def save(m, record, save_path, config=None, save_type="Both", formats=None, reduce_range=False):
    """Writes the quantized models of m from a record (as `calq save`): save_path is the prefix
    of the files (docs/cli.md, "calq save"); config the JSON or .cfg config the calibration used
    (None: every quantizable layer). formats: a list (or comma string) of "ascend", "qdq",
    "qoperator", "both", "all"; None: every format the model allows ("ascend" for Caffe).
    save_type: AMCT's Both, Fakequant, Deploy. reduce_range: 7-bit weights in the qdq and
    qoperator files (`--reduce-range`: exact in onnxruntime on CPUs without VNNI). Returns the
    formats left out, as (name, reason) pairs (only when formats is None). All files are written
    or none."""
    lib = _L()
    _model(m, "save: m")
    record = _path(record, "save: record")
    prefix = _path(save_path, "save: save_path")
    config = _path(config, "save: config", optional=True)
    fmts, chosen = _formats(formats, save_type, m.weights is not None or _b(m.path).endswith(b".prototxt"))
    if reduce_range:
        if not any(f in (_QDQ, _QOP) for f in fmts):
            raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "reduce_range applies to the qdq and qoperator files; the "
                        "formats %r write neither" % (formats,))
        fmts = [f | _REDUCE_RANGE if f in (_QDQ, _QOP) else f for f in fmts]
    if not fmts:
        return []
    _mkdir_parent(prefix)
    return _save(lib, m._handle(), record, config, fmts, chosen, prefix, None)


def _mkdir_parent(prefix):
    parent = os.path.dirname(prefix)
    if parent:
        os.makedirs(parent, exist_ok=True)


# ---- calibration from numpy batches ---------------------------------------------------------------
class _BatchError(Exception):
    """A batch that breaks the contract (not a dict, wrong names): reported through calq's error."""


class _Feeder:
    """The calq_data_next_fn over an iterator of dicts name -> ndarray. Only the current batch's
    arrays are referenced (calq copies them to its spool before asking for the next), so memory
    does not grow with the number of batches."""

    def __init__(self, batches, inputs):
        self.it = iter(batches)
        self.names = [v.name for v in inputs]
        self.keep = None
        self.exc = None
        self.fn = _capi.DATA_NEXT_FN(self)

    def checker(self, err):
        """A status check for the calls made while the library reads the batches: the generator's
        own exception is re-raised as itself, anything else as calq.Error."""
        def call(st):
            if st != _capi.CALQ_OK:
                if self.exc is not None:
                    raise self.exc
                _raise(st, err)
        return call

    def open(self, lib, data, err):
        """calq_data_open_stream over this feeder into the c_void_p `data` (freed by the caller)."""
        self.checker(err)(lib.calq_data_open_stream(self.fn, None, b"numpy batches", ctypes.byref(data),
                                                    ctypes.byref(err)))

    def __call__(self, user, batch, tensors, n, end, err):
        self.keep = None
        try:
            try:
                b = next(self.it)
            except StopIteration:
                end[0] = 1
                return _capi.CALQ_OK
            if not isinstance(b, collections.abc.Mapping):
                raise _BatchError("a batch is a dict input name -> numpy array, not %s" % type(b).__name__)
            unknown = sorted(set(b) - set(self.names))
            missing = [k for k in self.names if k not in b]
            if unknown or missing:
                raise _BatchError("the model's inputs are %s; the batch %s" % (
                    ", ".join(map(repr, self.names)),
                    "misses " + ", ".join(map(repr, missing)) if missing else "has unknown " + ", ".join(
                        map(repr, unknown))))
            keep = []
            for i, name in enumerate(self.names[:n]):
                a = np.ascontiguousarray(b[name])
                if not a.dtype.isnative:  # ">f4" from a big-endian file: calq reads native values
                    a = a.astype(a.dtype.newbyteorder("="))
                _fill(tensors[i], a, "input '%s'" % name)
                keep.append(a)
            self.keep = keep
            return _capi.CALQ_OK
        except (_BatchError, Error) as e:
            msg = str(e.message if isinstance(e, Error) else e)
        except BaseException as e:  # the caller's generator failed: re-raised once calq returns
            self.exc = e
            msg = "the batches iterator raised %s: %s" % (type(e).__name__, e)
        err.contents.message = msg.encode("utf-8", "replace")[:_capi.ERROR_MESSAGE_MAX - 1]
        return _capi.CALQ_ERR_BAD_PARAMETERS


CalibrationResult = collections.namedtuple("CalibrationResult", "record config skipped")
CalibrationResult.__doc__ = """What calq.calibrate wrote: the record and config paths, and the model
formats left out (name, reason) when formats was None."""


def calibrate(m, batches, save_path, batch_num=None, config=None, skip_layers=None, save_type="Both", formats=None,
              act_algo=None, activation_offset=None, skip_illegal=False, threads=0, qdq_scheme="layers",
              cache_mb=None):
    """Calibrates m on `batches` and saves the quantized models, as `calq calibration`:
    writes <save_path>_record.txt, <save_path>_config.json and the models (see calq.save for
    save_type and formats; save_type "None": the record and config only), all together or none.

    batches: an iterable of dicts input name -> numpy array (one batch each, the input's shape;
    any numeric dtype for a float input). It is read once, lazily: calq keeps the batches in a
    temporary file for its later passes, so memory does not grow with the number of batches.
    batch_num: batches to use; None: the config's batch_num when `config` is given, else every
    batch the iterable yields. A batch_num larger than the data raises calq.Error.
    config: AMCT's JSON config or .cfg file; skip_layers: layer names kept in float;
    act_algo ("ifmr", "hfmg", "minmax", "percentile", "kl", "mse", "auto") and
    activation_offset (bool) apply without a config. threads: OpenMP threads (0: default; the
    record never depends on it). qdq_scheme: "layers" (AMCT's) or "int8" (the tensors between
    layers calibrated too, for the QDQ / QOperator files: `calq calibration --qdq-scheme`).
    cache_mb: memory for the activation cache of the later passes (None: the library's 256; 0:
    its temporary file only; -1: off), as --cache-mb; the record never depends on it.
    Returns a CalibrationResult."""
    lib, h = _L(), _model(m, "calibrate: m")._handle()
    prefix = _path(save_path, "calibrate: save_path")
    config = _path(config, "calibrate: config", optional=True)
    _text(act_algo, "calibrate: act_algo", optional=True)
    if isinstance(skip_layers, (bytes, bytearray)) or (
            skip_layers is not None and not isinstance(skip_layers, (str, collections.abc.Iterable))):
        raise TypeError("calibrate: skip_layers must be a layer name or a list of them, not %s" %
                        type(skip_layers).__name__)
    skip = [skip_layers] if isinstance(skip_layers, str) else list(skip_layers or [])
    for name in skip:
        _text(name, "calibrate: skip_layers entry")
    if not isinstance(batches, collections.abc.Iterable):
        raise TypeError("calibrate: batches must be an iterable of dicts input name -> array, not %s" %
                        type(batches).__name__)
    caffe = m.weights is not None or _b(m.path).endswith(b".prototxt")
    fmts, chosen = _formats(formats, save_type, caffe)
    if batch_num is not None:
        batch_num = _whole(batch_num, "batch_num", 1, _INT_MAX)
    threads = _whole(threads, "threads", -_INT_MAX - 1, _INT_MAX)
    if cache_mb is not None:
        cache_mb = _whole(cache_mb, "cache_mb", -_INT_MAX - 1, _INT_MAX)
    if config is not None and (act_algo is not None or activation_offset is not None):
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "act_algo and activation_offset apply without a config; with "
                    "a config, set them in it")
    if qdq_scheme not in ("layers", "int8"):
        raise Error(_capi.CALQ_ERR_BAD_PARAMETERS, "qdq_scheme is \"layers\" or \"int8\", not %r" % (qdq_scheme,))
    record, config_out = prefix + "_record.txt", prefix + "_config.json"
    err = _capi.Error_()
    feeder = _Feeder(batches, m.inputs)
    call = feeder.checker(err)
    data, cfg, outs = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    try:
        feeder.open(lib, data, err)
        if config is not None:
            call(lib.calq_config_load(h, _b(config), ctypes.byref(cfg), ctypes.byref(err)))
            for name in skip:
                li = lib.calq_config_find_layer(cfg, _b(name))
                if li >= 0:
                    call(lib.calq_config_set_layer_enabled(cfg, li, 0, ctypes.byref(err)))
            if batch_num is not None:
                call(lib.calq_config_set_batch_num(cfg, batch_num, ctypes.byref(err)))
        else:
            if batch_num is None:  # every batch: read the iterable to its end (into the spool)
                call(lib.calq_data_check(data, h, 0, ctypes.byref(err)))
                batch_num = lib.calq_data_num_batches(data)
            o = _capi.ConfigOpts()
            lib.calq_config_opts_init(ctypes.byref(o))
            names = (ctypes.c_char_p * max(len(skip), 1))(*[_b(s) for s in skip])
            o.skip_layers = names
            o.n_skip_layers = len(skip)
            o.batch_num = batch_num
            if activation_offset is not None:
                o.activation_offset = 1 if activation_offset else 0
            o.act_algo = _b(act_algo)
            call(lib.calq_config_create(h, ctypes.byref(o), ctypes.byref(cfg), ctypes.byref(err)))
        _mkdir_parent(prefix)
        call(lib.calq_outputs_begin(_b(prefix), ctypes.byref(outs), ctypes.byref(err)))
        co = _capi.CalibrateOpts()
        lib.calq_calibrate_opts_init(ctypes.byref(co))
        co.n_threads = threads
        co.skip_illegal = 1 if skip_illegal else 0
        co.int8_tensors = 1 if qdq_scheme == "int8" else 0
        if cache_mb is not None:
            co.cache_mb = cache_mb
        co.config_out = _b(config_out)
        co.outputs = outs
        call(lib.calq_calibrate(h, cfg, data, ctypes.byref(co), _b(record), ctypes.byref(err)))
        skipped = []
        if fmts:
            try:
                skipped = _save(lib, h, record, config_out, fmts, chosen, prefix, outs)
            except Error as e:
                # the calibration is worth keeping (as the CLI does): commit the record and config
                o, outs = outs, ctypes.c_void_p()
                st = lib.calq_outputs_commit(o, ctypes.byref(err))
                kept = "the record and config are kept: fix the cause and run calq.save" if st == 0 else \
                    "nothing written"
                raise Error(e.status, "%s\n  No model written; %s." % (e.message, kept), e.layer) from None
        o, outs = outs, ctypes.c_void_p()
        call(lib.calq_outputs_commit(o, ctypes.byref(err)))
        return CalibrationResult(record, config_out, skipped)
    finally:
        if outs:
            lib.calq_outputs_abort(outs)
        if cfg:
            lib.calq_config_free(cfg)
        if data:
            lib.calq_data_free(data)
        feeder.keep = None


def compare(float_model, quantized, batches, batch_num=None, isolated=False, sensitivity=False, threads=0):
    """What quantization does to a model, as `calq compare --json`: the float model and a quantized
    model calq wrote from it (calq.Model each) on the same batches (an iterable of dicts input
    name -> numpy array, read once, lazily). isolated: also each layer quantized alone, fed the
    float input (its own error); sensitivity: also each layer quantized alone in the float model,
    measured at the model outputs (which layers the outputs lose most to; one run per layer and
    batch). batch_num: batches to use (None: every batch). Returns the report as a dict: "outputs"
    and "layers" (graph order) with their figures, the schema of docs/cli.md ("calq compare")."""
    lib = _L()
    fh = _model(float_model, "compare: float_model")._handle()
    qh = _model(quantized, "compare: quantized")._handle()
    if not isinstance(batches, collections.abc.Iterable):
        raise TypeError("compare: batches must be an iterable of dicts input name -> array, not %s" %
                        type(batches).__name__)
    batch_num = 0 if batch_num is None else _whole(batch_num, "batch_num", 1, _INT_MAX)
    threads = _whole(threads, "threads", -_INT_MAX - 1, _INT_MAX)
    err = _capi.Error_()
    feeder = _Feeder(batches, float_model.inputs)
    call = feeder.checker(err)
    data, res = ctypes.c_void_p(), ctypes.c_void_p()
    tmp = tempfile.mkdtemp(prefix="calq_compare_")
    try:
        feeder.open(lib, data, err)
        o = _capi.CompareOpts()
        lib.calq_compare_opts_init(ctypes.byref(o))
        o.isolated = 1 if isolated else 0
        o.sensitivity = 1 if sensitivity else 0
        o.batch_num = batch_num
        o.n_threads = threads
        o.log = 0
        call(lib.calq_compare(fh, qh, data, ctypes.byref(o), _b(float_model.path), _b(quantized.path),
                              ctypes.byref(res), ctypes.byref(err)))
        path = os.path.join(tmp, "report.json")
        call(lib.calq_compare_write_json(res, _b(path), ctypes.byref(err)))
        with open(path) as f:
            return json.load(f)
    finally:
        if res:
            lib.calq_compare_result_free(res)
        if data:
            lib.calq_data_free(data)
        feeder.keep = None
        shutil.rmtree(tmp, ignore_errors=True)
