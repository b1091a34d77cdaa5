"""Checks of what users pass to the algorithms: shapes, finite values and
floating-base quaternions. Errors are ValueErrors that say what and where.

Quaternions: a floating joint's quaternion is normalised by the algorithms
when its norm is within QUATERNION_TOLERANCE of 1 (float32 round trips,
estimator drift); a quaternion further from unit length is an error, not
something to guess around.

Results: finite inputs can still be too large to compute with (a velocity of
1e200 squares to inf). No algorithm returns a non-finite number: the kernels
report NONFINITE_RESULT, or the functions check their results (finite), and
overflow() raises the ValueError that says which inputs were too large.
"""
import math
import threading

import numpy as np
from numba import njit, types

from mbs_dynamics.compiled_calls import BorrowedArray, borrowed, compiled_entry, exact_dispatcher, plain
from mbs_dynamics.multibody.model import Model

QUATERNION_TOLERANCE = 1e-3
# Status codes the kernels return (0: done).
INVALID_INPUT = 1  # invalid(): without computing
NONFINITE_RESULT = 2  # all_finite() failed on the result
SINGULAR_MASS_MATRIX = 3  # (the ABA returns -1 - body instead, naming the body)


@njit(cache=True, inline="always")
def invalid(model, q, v, a):
    """0 if q, v, a are finite and every quaternion of q is within the tolerance
    of unit length; 1 otherwise (the kernels check this first, for nanoseconds;
    explain() then says what is wrong). Inlined: a call would pass `model`'s
    arrays, each reference-counted (atomic NRT calls: they were half of a
    Panda simulation step). q, v and a may differ in type (a read-only q and
    a writable v): a tuple of them could not be iterated."""
    if not (finite_vector(q) and finite_vector(v) and finite_vector(a)):
        return 1
    for start in model.quaternion_starts:
        norm = math.sqrt(q[start] ** 2 + q[start + 1] ** 2 + q[start + 2] ** 2 + q[start + 3] ** 2)
        if abs(norm - 1.0) > QUATERNION_TOLERANCE:
            return 1
    return 0


@njit(cache=True, inline="always")
def finite_vector(x):
    """True when every element of the vector x is finite: counted without a
    branch as all_finite does (which LLVM vectorises: TALOS's q in a few ns)."""
    infinite = 0
    for k in range(x.shape[0]):
        infinite += (x[k] - x[k]) != 0.0
    return infinite == 0


@njit(cache=True)
def all_finite(x):
    """True when every element of the array x is finite. Counted without a
    branch (inf - inf and NaN - NaN are NaN), which LLVM vectorises: 0.12 us
    for TALOS's 38 x 38 mass matrix, where testing each element took 1.1 us."""
    infinite = 0
    for value in x.flat:
        infinite += (value - value) != 0.0
    return infinite == 0


# --- the per-call fast path ---------------------------------------------------
# A function called one state at a time passes its users' arrays straight to
# an ExactKernel; only when that refuses them (a list, float32, a batch, a
# wrong length or stride, a NaN: a status, `exact` false, or TypeError) does
# it take its checked path, which converts, explains and raises as before.
# The fast path costs a microsecond less than converting (shaped) and
# checking (same_batch) in Python: on a UR5 that is half of a call.

# The argument types of ExactKernels: model.packed_flat, vectors (q, v, ...
# read-only or not: a writable one converts at little cost) and results
# (borrowed by the kernels: ExactKernel).
PACKED_FLAT = types.Array(types.int64, 1, "C", readonly=True)
VECTOR = types.Array(types.float64, 1, "C", readonly=True)
RESULT = types.Array(types.float64, 1, "C")
RESULT_MATRIX = types.Array(types.float64, 2, "C")
NDARRAY, FLOAT64 = np.ndarray, np.dtype(np.float64)


def exact(x) -> bool:
    """True when x may go to an ExactKernel's `entry` as a vector: a numpy
    array (not a subclass) of one dimension and native float64. Its stride
    is checked by the kernel (vectors_fit): the entry reads the array's
    shape and strides as they are and the dimensions of its types, so a
    batch must never reach it (its unboxing would write past the one
    dimension). About 70 ns, as long as numba's dispatcher takes to check
    a whole call's types: `entry` pays where a call has one user vector.
    The per-call functions write this expression out (with NDARRAY and
    FLOAT64 as globals of their own): the call of a Python function costs
    them 30-50 ns."""
    return type(x) is NDARRAY and x.ndim == 1 and x.dtype is FLOAT64


class ExactKernel:
    """A compiled function in exactly one signature, compiled (or loaded from
    numba's cache) on its first call, two ways to call it from Python (a
    compiled caller cannot compile it):

    * `call`: arguments of other types raise TypeError in about a
      microsecond, where numba's own dispatcher would compile another
      version for them (seconds) or search its conversions and explain the
      mismatch (some 100 µs): compiled_calls.exact_dispatcher.
    * `entry`: without numba's type resolution (compiled_calls.compiled_entry),
      reading its arguments as the signature's types unchecked: for the
      caller's own arrays and users' vectors that `exact` accepted.

    Its array arguments are borrowed (compiled_calls.BorrowedArray: no
    reference of numba's runtime, some 20 ns an array a call): `function`
    takes them through workspace.untracked_views first thing, as the plain
    argument_types, and returns a status, never an array."""

    def __init__(self, function, result_type, *argument_types):
        self.function = function
        self.signature = result_type(*(borrowed(argument) if isinstance(argument, types.Array) else argument
                                       for argument in argument_types))
        self.lock = threading.Lock()
        self.call = self.entry = self._first_call

    def entry_global(self, namespace: dict, name: str):
        """A function to put in namespace[name] (a module's globals) that
        calls `entry` (compiling or loading it) and puts the entry itself
        in its place: a per-call function that calls the global saves some
        30 ns a call over `kernel.entry(...)` (Python 3.11 does not
        specialise the method call of an instance attribute)."""
        def first_call(*args):
            status = self.entry(*args)
            namespace[name] = self.entry
            return status
        return first_call

    def _first_call(self, *args):
        with self.lock:
            if self.call == self._first_call:
                dispatcher = exact_dispatcher(self.function, self.signature, self._conversions())
                self.entry = compiled_entry(dispatcher, args)
                self.call = dispatcher
        return self.call(*args)

    def _conversions(self):
        """The conversions `call` applies: to each borrowed argument type from its plain type (a user's array),
        and to a read-only one from the writable plain type too."""
        conversions = []
        for argument in self.signature.args:
            if isinstance(argument, BorrowedArray):
                conversions += [(plain(argument), argument)] + ([] if argument.mutable else [
                    (plain(argument).copy(readonly=False), argument)])
        return conversions


@njit(cache=True, inline="always")
def vectors_fit(ints, q, v, a):
    """True when q has the model's nq elements and v and a its nv (model.packed's
    ints: nv in the header, nq last, multibody.model.lay_out_model), each with
    its elements next to each other (an ExactKernel's entry takes a strided
    vector as it is: unit_stride)."""
    nq, nv = ints[ints.shape[0] - 1], ints[2]
    return q.shape[0] == nq and v.shape[0] == nv and a.shape[0] == nv and unit_stride(q) and unit_stride(v) \
        and unit_stride(a)


@njit(cache=True, inline="always")
def unit_stride(x):
    """True when the vector x's elements are adjacent: its stride as the
    array has it (numba reads the struct's, also where the type says "C")."""
    return x.shape[0] <= 1 or x.strides[0] == 8


def overflow(model: Model, what: str, *named) -> ValueError:
    """The error for a non-finite result from finite inputs: named is
    (value, name) pairs of the inputs, whose largest magnitudes it reports."""
    sizes = ", ".join(f"|{name}| up to {float(np.max(np.abs(value), initial=0.0)):.3g}"
                      for value, name in named if value is not None and np.size(value))
    return ValueError(f"{what} of model '{model.name}' cannot be computed: the inputs are too large"
                      + (f" ({sizes})" if sizes else "") + " and the result overflows")


def refuse(model: Model, status, what: str, q, *named) -> None:
    """Raise what a kernel's status (or a batch's statuses) reports, if
    anything: INVALID_INPUT (explain) or NONFINITE_RESULT (overflow); `what`
    names the result, named the inputs besides q as (value, name) pairs."""
    if not isinstance(status, np.ndarray):
        if status == 0:  # the common case, at no cost: a kernel's int
            return
        status = np.asarray(status)
    if np.any(status == INVALID_INPUT):
        explain(model, q, *named)
    if np.any(status == NONFINITE_RESULT):
        raise overflow(model, what, (q, "q"), *named)


def finite(model: Model, result, what: str, *named):
    """result, or the overflow() error when an element of it is not finite."""
    if not all_finite(np.atleast_1d(result)):
        raise overflow(model, what, *named)
    return result


def shaped(model: Model, value, size: int, name: str, batch: bool = True) -> np.ndarray:
    """value as C-contiguous float64 of shape (size,) or, when batch, (N, size).
    Values are checked by the kernels (invalid); explain() reports them."""
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.shape == (size,):
        return array
    if not batch or array.ndim != 2 or array.shape[1] != size:
        expected = f"({size},)" if not batch else f"({size},) or (N, {size})"
        raise ValueError(f"{name} must have shape {expected} for model '{model.name}', got {array.shape}")
    return array


def explain(model: Model, q, *vectors) -> None:
    """Raise the ValueError that says what is wrong with q and the named vectors
    [(value, name), ...], after a kernel found them invalid."""
    configuration(model, q)
    for value, name in vectors:
        vector(model, value, model.nv, name)
    raise AssertionError("a kernel reported invalid input that the checks accept")


def vector(model: Model, value, size: int, name: str, batch: bool = True) -> np.ndarray:
    """value as float64 of shape (size,) or, when batch, (N, size); finite."""
    # C-contiguous float64: the one layout the kernels are compiled (and cached) for
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.ndim == 1 or not batch:
        if array.shape != (size,):
            raise ValueError(f"{name} must have shape ({size},) for model '{model.name}', got {array.shape}")
    elif array.ndim != 2 or array.shape[1] != size:
        raise ValueError(f"{name} must have shape ({size},) or (N, {size}) for model '{model.name}', "
                         f"got {array.shape}")
    if not all_finite(array):
        where = tuple(np.argwhere(~np.isfinite(array))[0].tolist())
        raise ValueError(f"{name} has a non-finite value ({array[where]}) at index {where}")
    return array


def configuration(model: Model, q, batch: bool = True) -> np.ndarray:
    """q checked as above, and its floating-base quaternions near unit length."""
    q = vector(model, q, model.nq, "q", batch)
    for start, joint in model.quaternions:
        quaternion = q[..., start:start + 4]
        norm = math.sqrt(float(quaternion @ quaternion)) if q.ndim == 1 else None
        if norm is not None and abs(norm - 1.0) <= QUATERNION_TOLERANCE:
            continue
        norms = np.atleast_1d(np.linalg.norm(quaternion, axis=-1))
        bad = np.abs(norms - 1.0) > QUATERNION_TOLERANCE
        if np.any(bad):
            row = int(np.argmax(bad))
            where = f"q[{start}:{start + 4}]" if q.ndim == 1 else f"q[{row}, {start}:{start + 4}]"
            raise ValueError(
                f"{where}, the quaternion of joint '{joint}', has norm {norms[row]:.6g}; it must be a "
                f"unit quaternion (x, y, z, w) within {QUATERNION_TOLERANCE:g}"
            )
    return q


def same_batch(*arrays) -> int:
    """The batch size N shared by the arrays (0 when none is batched)."""
    if all(a.ndim == 1 for a in arrays):
        return 0
    sizes = {a.shape[0] for a in arrays if a.ndim == 2}
    single = any(a.ndim == 1 for a in arrays)
    if len(sizes) > 1 or (sizes and single):
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"batched inputs must all have the same leading size N, got shapes {shapes}")
    return sizes.pop() if sizes else 0
