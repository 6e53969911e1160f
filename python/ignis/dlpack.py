"""ignis.dlpack — host float32 arrays that hand their memory to numpy, torch, JAX, CuPy, ...
through the DLPack protocol (__dlpack__ / __dlpack_device__), built with ctypes: no compiled
extension.

An Array owns a ctypes buffer that libignis wrote into directly (ig_engine_logits fills it), so
`numpy.from_dlpack(arr)` / `torch.from_dlpack(arr)` view that same memory: zero copies from the
library to the consumer. Each __dlpack__ call makes a DLManagedTensorVersioned (DLPack 1.0,
capsule "dltensor_versioned") when the consumer asks with max_version >= (1, 0), else the
legacy DLManagedTensor (capsule "dltensor", which consumers read as read-only). The tensor
keeps the Array's buffer alive until the consumer calls its deleter; a capsule dropped without
being consumed (still named "dltensor") calls the deleter itself, as the protocol says.
"""
import ctypes
import threading
from typing import Optional, Sequence, Tuple

__all__ = ["Array", "DEVICE_CPU"]

DEVICE_CPU = 1  # kDLCPU
_FLOAT = 2      # kDLFloat


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                      ("deleter", _DELETER_V), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]

# tensors handed out and not yet deleted: address of the DLManagedTensor -> what it keeps alive
_live = {}
_live_lock = threading.Lock()


def _forget(mt):
    with _live_lock:
        _live.pop(ctypes.addressof(mt.contents), None)


_delete = _DELETER(_forget)
_delete_v = _DELETER_V(_forget)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_NAME, _NAME_V = b"dltensor", b"dltensor_versioned"


def _capsule_destructor(name, struct):
    @_CAPSULE_DESTRUCTOR
    def gone(cap):
        # a consumed capsule is renamed "used_...": its consumer owns the deleter call
        if _api.PyCapsule_IsValid(cap, name):
            mt = ctypes.cast(_api.PyCapsule_GetPointer(cap, name), ctypes.POINTER(struct))
            mt.contents.deleter(mt)
    return gone


_capsule_gone = _capsule_destructor(_NAME, _DLManagedTensor)
_capsule_gone_v = _capsule_destructor(_NAME_V, _DLManagedTensorVersioned)


class Array:
    """A C-contiguous float32 array in host memory, exported through DLPack.

    `numpy.from_dlpack(a)` and `torch.from_dlpack(a)` return views of its buffer (no copy);
    `a.numpy()` is the same for numpy. shape is a tuple, like numpy's."""

    def __init__(self, shape: Sequence[int]):
        self.shape: Tuple[int, ...] = tuple(int(s) for s in shape)
        n = 1
        for s in self.shape:
            n *= s
        self.size = n
        self.dtype = "float32"
        self._buf = (ctypes.c_float * max(n, 1))()

    @property
    def data_ptr(self) -> int:
        """Address of the first element."""
        return ctypes.addressof(self._buf)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (DEVICE_CPU, 0)

    def __dlpack__(self, stream: Optional[int] = None, max_version=None, dl_device=None, copy: Optional[bool] = None):
        """A "dltensor" capsule viewing this array. stream is ignored (host memory: nothing to
        synchronize); copy=True exports a fresh copy instead of a view."""
        if dl_device is not None and tuple(dl_device) != (DEVICE_CPU, 0):
            raise BufferError(f"ignis.dlpack.Array lives on the CPU, not on device {tuple(dl_device)}")
        src = self
        if copy:
            src = Array(self.shape)
            ctypes.memmove(src._buf, self._buf, ctypes.sizeof(self._buf))
        ndim = len(src.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*src.shape)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        mt = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
        t = mt.dl_tensor
        t.data = ctypes.addressof(src._buf)
        t.device = _DLDevice(DEVICE_CPU, 0)
        t.ndim = ndim
        t.dtype = _DLDataType(_FLOAT, 32, 1)
        t.shape = shape
        t.strides = None  # C-contiguous
        t.byte_offset = 0
        mt.manager_ctx = None
        if versioned:  # DLPack 1.0: writable (flags 0), and the consumer may see a copy was made
            mt.version = _DLPackVersion(1, 0)
            mt.flags = 2 if copy else 0  # DLPACK_FLAG_BITMASK_IS_COPIED
            mt.deleter = _delete_v
        else:
            mt.deleter = _delete
        with _live_lock:
            _live[ctypes.addressof(mt)] = (mt, shape, src)
        if versioned:
            return _api.PyCapsule_New(ctypes.addressof(mt), _NAME_V, _capsule_gone_v)
        return _api.PyCapsule_New(ctypes.addressof(mt), _NAME, _capsule_gone)

    def numpy(self):
        """A numpy view of the buffer (numpy.from_dlpack)."""
        import numpy as np
        return np.from_dlpack(self)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def __repr__(self):
        return f"ignis.dlpack.Array(shape={self.shape}, dtype=float32, device=cpu)"
