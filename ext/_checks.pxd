# The one argument-check module for every kernel's ``def`` boundary (cimported by each .pyx).
#
# What a kernel may read through a raw pointer: a NumPy array of the kernel's dtype, in native
# byte order, aligned and C-contiguous (``is_native``). Everything else goes through
# ``real_array``, which converts any real dtype (bool, int, float; any byte order, any strides)
# into exactly that with one copy, and refuses the rest (strings, complex, objects) with a
# TypeError naming the argument. Scalars go through ``positive_int`` and ``finite_real``.
#
# All functions are inline (no module of their own to import at run time), like trees.pxd.
cimport numpy as cnp
from libc.math cimport isfinite
from _types cimport intp_t


cdef inline bint is_native(object x, int typenum) noexcept:
    """x is an ndarray of ``typenum`` in native byte order, aligned and C-contiguous: a kernel
    may read it through a raw pointer as it is."""
    if not cnp.PyArray_Check(x):
        return False
    cdef cnp.ndarray a = <cnp.ndarray>x
    return (cnp.PyArray_TYPE(a) == typenum and cnp.PyArray_ISCARRAY_RO(a)
            and cnp.PyArray_ISNOTSWAPPED(a))


cdef inline bint is_native_vec(object x, int typenum, intp_t size) noexcept:
    """``is_native`` and 1-D with ``size`` elements (any length when size < 0)."""
    if not is_native(x, typenum):
        return False
    cdef cnp.ndarray a = <cnp.ndarray>x
    return cnp.PyArray_NDIM(a) == 1 and (size < 0 or cnp.PyArray_DIM(a, 0) == size)


cdef inline object as_array(object x, str name):
    """np.asarray(x) (arrays, lists, CPU torch tensors) with an error that names ``name``."""
    if cnp.PyArray_Check(x):
        return x
    try:
        return cnp.PyArray_FROM_O(x)
    except Exception as exc:   # e.g. a torch tensor that requires grad or lives on a GPU
        raise TypeError(f"{name} could not be converted to a NumPy array ({exc}); pass a NumPy "
                        f"array (for a torch tensor: t.detach().cpu().numpy())") from None


cdef inline object check_real(object arr, str name):
    """arr (an ndarray) unchanged when it holds real numbers (bool, int, float), else TypeError."""
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers (bool, int or float), got dtype "
                        f"{arr.dtype}; convert it with np.asarray({name}, dtype=np.float64)")
    return arr


cdef inline object real_array(object x, str name, int typenum):
    """x as an ndarray of ``typenum``, native byte order, aligned, C-contiguous (x itself when it
    already is one, else one converting copy). Any real dtype converts; other dtypes raise."""
    if is_native(x, typenum):
        return x
    arr = check_real(as_array(x, name), name)
    return cnp.PyArray_FROM_OTF(arr, typenum, cnp.NPY_ARRAY_IN_ARRAY | cnp.NPY_ARRAY_FORCECAST)


cdef inline object exact_array(object x, str name, int typenum):
    """x as an ndarray of exactly ``typenum`` (no dtype conversion: callers on a hot path want
    the caller to convert once), native byte order, aligned, C-contiguous (copied when not)."""
    if is_native(x, typenum):
        return x
    if not cnp.PyArray_Check(x):
        raise TypeError(f"{name} must be a NumPy array, got {type(x).__name__}; pass "
                        f"tensor.numpy() or np.asarray({name})")
    want = cnp.PyArray_DescrFromType(typenum)
    if cnp.PyArray_TYPE(<cnp.ndarray>x) != typenum:
        raise TypeError(f"{name} has dtype {x.dtype}, expected {want}; convert it once with "
                        f".astype(np.{want})")
    return cnp.PyArray_FROM_OTF(x, typenum, cnp.NPY_ARRAY_IN_ARRAY)


cdef inline object output_array(object x, str name, int typenum, object shape, tuple inputs):
    """x, a caller's preallocated output (``out=``), when it is a writeable ndarray of
    ``typenum`` in native byte order, aligned, C-contiguous, of ``shape``, and shares no memory
    with ``inputs`` (a kernel reads those while it writes x); else TypeError/ValueError saying
    what to pass. Nothing is copied: the kernel writes into x."""
    want = cnp.PyArray_DescrFromType(typenum)
    if not cnp.PyArray_Check(x):
        raise TypeError(f"{name} must be a NumPy array, got {type(x).__name__}; pass "
                        f"np.empty({tuple(shape)}, dtype=np.{want})")
    cdef cnp.ndarray a = <cnp.ndarray>x
    if cnp.PyArray_TYPE(a) != typenum or not cnp.PyArray_ISNOTSWAPPED(a):
        raise TypeError(f"{name} has dtype {x.dtype}, expected native {want}; pass "
                        f"np.empty({tuple(shape)}, dtype=np.{want})")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {x.shape}, expected {tuple(shape)} (the inputs' shape)")
    if not cnp.PyArray_ISCARRAY(a):
        raise ValueError(f"{name} must be writeable, aligned and C-contiguous; pass a fresh "
                         f"np.empty({tuple(shape)}, dtype=np.{want}) or np.ascontiguousarray of it")
    import numpy as np
    for other in inputs:
        if np.may_share_memory(x, other):
            raise ValueError(f"{name} shares memory with an input; the kernel reads the inputs while "
                             f"it writes {name}: pass separate arrays")
    return x


cdef inline object outputs_pair(object out, object shape, int typenum, tuple inputs):
    """``out=(a, b)`` checked by ``output_array`` (a and b distinct too), or None when out is None."""
    if out is None:
        return None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"out must be a pair (advantages, returns) of arrays, got {type(out).__name__}")
    a = output_array(out[0], "out[0] (advantages)", typenum, shape, inputs)
    b = output_array(out[1], "out[1] (returns)", typenum, shape, inputs + (a,))
    return (a, b)


cdef inline intp_t positive_int(object value, str name) except -1:
    """value as an int >= 1 (Python or NumPy int; bool refused), else TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, cnp.integer)):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


cdef inline double finite_real(object value, str name) except? -1.0:
    """value as a finite float (Python/NumPy real or 0-d array), else TypeError/ValueError."""
    cdef double out
    if isinstance(value, (str, bytes, complex)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} "
                        f"{value!r}") from None
    if not isfinite(out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


cdef inline void check_length(intp_t n, intp_t expected, str name, str what) except *:
    """ValueError unless n == expected (``what`` says what the expected length is)."""
    if n != expected:
        raise ValueError(f"{name} has {n} entries, expected {expected} ({what})")
