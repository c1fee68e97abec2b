"""ctypes declarations of the part of include/calq.h the binding uses, and the search for
libcalq.so. Structs mirror the C ones field for field (calq.h is the reference: a field added
there is added here, at the same place). Nothing here is public: see calq/__init__.py."""
import ctypes
import ctypes.util
import os

from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint, c_void_p)

MAX_DIMS = 8  # CALQ_MAX_DIMS
ERROR_MESSAGE_MAX = 4096  # CALQ_ERROR_MESSAGE_MAX
ERROR_NAME_MAX = 256  # CALQ_ERROR_NAME_MAX
# the ABI this file describes: libcalq 0.5 (calq.h CALQ_VERSION_MAJOR/MINOR; before 1.0 a minor
# release may change the ABI, docs/c-api.md "Versions")
ABI = (0, 5)

CALQ_OK = 0
CALQ_ERR_GENERIC = -65536
CALQ_ERR_BAD_PARAMETERS = -65530


class Error_(Structure):  # calq_error
    _fields_ = [("status", c_int), ("message", c_char * ERROR_MESSAGE_MAX), ("layer", c_char * ERROR_NAME_MAX)]


class Tensor(Structure):  # calq_tensor
    _fields_ = [("dtype", c_int), ("ndim", c_int), ("dims", c_int64 * MAX_DIMS), ("data", c_void_p)]


class ValueInfo(Structure):  # calq_value_info
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_int), ("dims", c_int64 * MAX_DIMS)]


class ConfigOpts(Structure):  # calq_config_opts
    _fields_ = [("skip_layers", POINTER(c_char_p)), ("n_skip_layers", c_int), ("batch_num", c_int),
                ("activation_offset", c_int), ("config_defination", c_char_p), ("act_algo", c_char_p)]


PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)  # calq_progress_fn (the binding passes NULL)


class CalibrateOpts(Structure):  # calq_calibrate_opts
    _fields_ = [("n_threads", c_int), ("skip_illegal", c_int), ("log", c_int), ("config_out", c_char_p),
                ("outputs", c_void_p), ("progress", PROGRESS_FN), ("progress_user", c_void_p),
                ("int8_tensors", c_int), ("cache_mb", c_int), ("max_arena_bytes", c_size_t)]


class SessionOpts(Structure):  # calq_session_opts
    _fields_ = [("n_threads", c_int), ("kernels", c_int), ("no_fusion", c_int),
                ("skip_fusion_layers", POINTER(c_char_p)), ("n_skip_fusion_layers", c_int),
                ("max_arena_bytes", c_size_t)]


class CompareOpts(Structure):  # calq_compare_opts
    _fields_ = [("isolated", c_int), ("sensitivity", c_int), ("outputs_only", c_int), ("batch_num", c_int),
                ("n_threads", c_int), ("log", c_int), ("max_arena_bytes", c_size_t)]


class SaveSkip(Structure):  # calq_save_skip
    _fields_ = [("format", c_int), ("status", c_int), ("reason", c_char * 512)]


# calq_data_next_fn(user, batch, inputs, n_inputs, &end, err)
DATA_NEXT_FN = CFUNCTYPE(c_int, c_void_p, c_int, POINTER(Tensor), c_int, POINTER(c_int), POINTER(Error_))
# calq_log_fn(user, level, message)
LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)

_P = c_void_p  # opaque handles (calq_model *, calq_session *, calq_config *, calq_data *, calq_outputs *)
_E = POINTER(Error_)

# name: (restype, argtypes)
_FUNCS = {
    "calq_version": (c_uint, []),
    "calq_version_string": (c_char_p, []),
    "calq_status_name": (c_char_p, [c_int]),
    "calq_set_log": (None, [LOG_FN, c_void_p, c_int]),
    "calq_model_load_onnx": (c_int, [c_char_p, POINTER(_P), _E]),
    "calq_model_load_caffe": (c_int, [c_char_p, c_char_p, POINTER(_P), _E]),
    "calq_model_free": (None, [_P]),
    "calq_model_num_inputs": (c_int, [_P]),
    "calq_model_num_outputs": (c_int, [_P]),
    "calq_model_input_info": (c_int, [_P, c_int, POINTER(ValueInfo)]),
    "calq_model_output_info": (c_int, [_P, c_int, POINTER(ValueInfo)]),
    "calq_model_set_input_shape": (c_int, [_P, c_char_p, POINTER(c_int64), c_int, _E]),
    "calq_session_opts_init": (None, [POINTER(SessionOpts)]),
    "calq_session_create": (c_int, [_P, POINTER(SessionOpts), POINTER(_P), _E]),
    "calq_session_free": (None, [_P]),
    "calq_session_run": (c_int, [_P, POINTER(Tensor), c_int, _E]),
    "calq_session_output": (c_int, [_P, c_int, POINTER(POINTER(Tensor))]),
    "calq_config_opts_init": (None, [POINTER(ConfigOpts)]),
    "calq_config_create": (c_int, [_P, POINTER(ConfigOpts), POINTER(_P), _E]),
    "calq_config_load": (c_int, [_P, c_char_p, POINTER(_P), _E]),
    "calq_config_free": (None, [_P]),
    "calq_config_find_layer": (c_int, [_P, c_char_p]),
    "calq_config_set_layer_enabled": (c_int, [_P, c_int, c_int, _E]),
    "calq_config_set_batch_num": (c_int, [_P, c_int, _E]),
    "calq_config_batch_num": (c_int, [_P]),
    "calq_data_open_stream": (c_int, [DATA_NEXT_FN, c_void_p, c_char_p, POINTER(_P), _E]),
    "calq_data_check": (c_int, [_P, _P, c_int, _E]),
    "calq_data_num_batches": (c_int, [_P]),
    "calq_data_free": (None, [_P]),
    "calq_calibrate_opts_init": (None, [POINTER(CalibrateOpts)]),
    "calq_calibrate": (c_int, [_P, _P, _P, POINTER(CalibrateOpts), c_char_p, _E]),
    "calq_outputs_begin": (c_int, [c_char_p, POINTER(_P), _E]),
    "calq_outputs_commit": (c_int, [_P, _E]),
    "calq_outputs_abort": (None, [_P]),
    "calq_save_models": (c_int, [_P, c_char_p, c_char_p, POINTER(c_int), c_int, c_char_p, _E]),
    "calq_save_models_available": (c_int, [_P, c_char_p, c_char_p, POINTER(c_int), c_int, c_char_p,
                                           POINTER(SaveSkip), POINTER(c_int), _E]),
    "calq_save_models_staged": (c_int, [_P, _P, c_char_p, c_char_p, POINTER(c_int), c_int, c_char_p,
                                        POINTER(SaveSkip), POINTER(c_int), _E]),
    "calq_compare_opts_init": (None, [POINTER(CompareOpts)]),
    "calq_compare": (c_int, [_P, _P, _P, POINTER(CompareOpts), c_char_p, c_char_p, POINTER(_P), _E]),
    "calq_compare_write_json": (c_int, [_P, c_char_p, _E]),
    "calq_compare_result_free": (None, [_P]),
}

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def _candidates():
    """CALQ_LIBRARY, then the build folder of the checkout this package sits in, then the system
    (the dynamic loader's search, then ctypes.util.find_library)."""
    env = os.environ.get("CALQ_LIBRARY")
    if env:
        return [env], True
    found = [os.path.join(_REPO, "build", "libcalq.so")]
    found.append("libcalq.so.%d" % ABI[0])
    lib = ctypes.util.find_library("calq")
    if lib:
        found.append(lib)
    return found, False


def load_library():
    paths, explicit = _candidates()
    tried = []
    for p in paths:
        if os.path.sep in p and not os.path.exists(p):
            tried.append("%s (no such file)" % p)
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        for name, (res, args) in _FUNCS.items():
            try:
                f = getattr(lib, name)
            except AttributeError:
                raise OSError("%s has no %s: it is not libcalq %d.%d (set CALQ_LIBRARY to a matching "
                              "libcalq.so)" % (p, name, ABI[0], ABI[1]))
            f.restype = res
            f.argtypes = args
        have = lib.calq_version()
        if (have >> 16, (have >> 8) & 0xFF) != ABI:
            raise OSError("%s is libcalq %s; this binding needs %d.%d.x (set CALQ_LIBRARY to a matching "
                          "libcalq.so)" % (p, lib.calq_version_string().decode(), ABI[0], ABI[1]))
        return lib
    how = "CALQ_LIBRARY=%s" % paths[0] if explicit else "CALQ_LIBRARY, the build folder, the system"
    raise OSError("cannot load libcalq (%s): %s. Build it (make build) or set CALQ_LIBRARY to the path of "
                  "libcalq.so" % (how, "; ".join(tried)))
