"""Scratch memory of the compiled recursions: one flat buffer per model and
thread (the model itself stays constant), which each kernel lays out as the
per-body arrays it needs. One buffer is one argument to unbox per call,
where a dozen separate arrays cost microseconds.

The per-body arrays are untracked views (numba.carray over a pointer into the
buffer): reshaping a slice costs some 20 ns, and every array a compiled
function passes on to another is reference-counted, twice, per call; an
untracked view costs neither. They are valid while the buffer lives, so they
never leave the kernels: results are copied into arrays the caller owns.
"""
from collections import namedtuple

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from mbs_dynamics.compiled_calls import plain, plain_argument_types

# Floats per body: more than any algorithm lays out (the ABA takes 198).
FLOATS_PER_BODY = 256
FLOATS_FIXED = 256


@plain_argument_types  # (floats_per_body: a constant of the caller)
@njit(cache=True)
def new_scratch(nbodies, floats_per_body=FLOATS_PER_BODY):
    return np.empty(nbodies * floats_per_body + FLOATS_FIXED)


# The largest scratch a call from Python takes on the stack (call_scratch): 32 KB,
# a UR5's 2048 floats, Solo-12's 3584; TALOS's 10240 on the heap.
STACK_SCRATCH_FLOATS = 4096


@intrinsic
def _stack_floats(typingctx, size):
    """A pointer to `size` float64 on the stack of the function this is inlined into."""
    def codegen(context, builder, signature, args):
        return builder.alloca(context.get_value_type(types.float64), size=args[0])
    return types.CPointer(types.float64)(types.intp), codegen


@njit(cache=True, inline="always")
def call_scratch(nbodies, floats_per_body):
    """new_scratch's buffer of floats_per_body per body (and FLOATS_FIXED)
    for one call from Python (an ExactKernel's function), sized by what its
    kernel lays out (the frame Jacobian's 91 a body, not 256), on that
    function's stack when it has at most STACK_SCRATCH_FLOATS: a malloc and
    free less (35-40 ns of a UR5's mass matrix; TALOS's 80 KB on the heap
    cost some 0.2 µs a call). Inlined (numba's inlining: the stack is the
    caller's), it is valid until the caller returns, so only a function that
    runs once a call may take it (in a loop, every pass would take more
    stack)."""
    size = nbodies * floats_per_body + FLOATS_FIXED
    if size <= STACK_SCRATCH_FLOATS:
        return carray(_stack_floats(size), (size,))
    return new_scratch(nbodies, floats_per_body)


def scratch(model, floats_per_body=FLOATS_PER_BODY) -> np.ndarray:
    """The calling thread's scratch buffer for `model`, of floats_per_body per body
    (the derivative algorithms lay out more than the rest)."""
    buffers = model.scratch.__dict__  # this thread's: {floats per body: buffer}
    buffer = buffers.get(floats_per_body)
    if buffer is None:
        buffer = buffers[floats_per_body] = new_scratch(model.nbodies, floats_per_body)
    return buffer


@intrinsic
def _element_pointer(typingctx, array, index):
    """A pointer to array's element `index` (flat, unchecked)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.gep(data, [args[1]])
    return types.CPointer(array.dtype)(array, index), codegen


@intrinsic
def _float_pointer(typingctx, array, index):
    """A float64 pointer to the bits of element `index` of a 64-bit integer array."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.bitcast(builder.gep(data, [args[1]]), context.get_value_type(types.float64).as_pointer())
    return types.CPointer(types.float64)(array, index), codegen


@njit(cache=True, inline="always")
def float_view(ints, offset, size):
    """The float64 numbers whose bits an int64 array holds from `offset` on,
    `size` of them, as an untracked view (module docstring)."""
    if offset + size > ints.shape[0]:
        raise ValueError("float view larger than its buffer")
    return carray(_float_pointer(ints, offset), (size,))


# Not inline="always": LLVM inlines this small function all the same (the
# kernels run as fast), while numba's own inlining copied and typed it anew
# at each of its ~90 call sites, a third of the nodes' compile time. Compiled
# once per type of buffer and number of dimensions, not per literal shape
# (plain_argument_types: 70 versions of take and take_unchecked -> 15).
@plain_argument_types
@njit(cache=True)
def take(buffer, offset, shape):
    """The next block of the 1-D `buffer` as an untracked array of `shape`, and
    the offset after it. A layout that outgrows the buffer raises."""
    view, end = take_unchecked(buffer, offset, shape)
    if end > buffer.shape[0]:
        raise ValueError("scratch layout larger than its buffer")
    return view, end


@plain_argument_types
@njit(cache=True)
def take_unchecked(buffer, offset, shape):
    """take without its bound check, for a layout that its caller checks as a
    whole (its end against the buffer's): a view no kernel reads then costs
    nothing (LLVM drops it), where each check stays (a branch to a raise)."""
    size = 1
    for extent in shape:
        size *= extent
    return carray(_element_pointer(buffer, offset), shape), offset + size


# A length no layout reaches (elements): see unbounded.
UNBOUNDED = 2**62


@njit(cache=True)
def unbounded(buffer):
    """`buffer`'s memory viewed as an array of UNBOUNDED elements: laying a
    record out on it with take measures the layout (its end offset) without
    touching memory, so that a layout written once both sizes its buffer and
    views it. The views taken from it must never be read or written."""
    return carray(_element_pointer(buffer, 0), (UNBOUNDED,))


@intrinsic
def readonly(typingctx, array):
    """`array` typed read-only, the same memory: for a kernel that passes its
    own array where callers pass read-only ones (one compiled version)."""
    def codegen(context, builder, signature, args):
        context.nrt.incref(builder, signature.args[0], args[0])
        return args[0]
    return array.copy(readonly=True)(array), codegen


@njit(cache=True)
def untracked(array):
    """A C-contiguous array's memory as an untracked view (module docstring),
    for a kernel that passes it on at every step: valid while `array` lives
    (a kernel's argument lives until it returns)."""
    if not array.flags.c_contiguous:
        raise ValueError("untracked: the array is not C-contiguous")
    return carray(_element_pointer(array, 0), array.shape)


def _untracked_value(context, builder, value_type, value):
    """`value` (an array, or a tuple of them and of other values) with each
    array's meminfo and parent null: an untracked view, no reference taken."""
    if isinstance(value_type, types.Array):
        array = context.make_array(value_type)(context, builder, value=value)
        array.meminfo = context.get_constant_null(types.MemInfoPointer(types.voidptr))
        array.parent = context.get_constant_null(types.pyobject)
        return array._getvalue()
    if isinstance(value_type, types.BaseTuple):
        for index, element_type in enumerate(value_type):
            element = _untracked_value(context, builder, element_type, builder.extract_value(value, index))
            value = builder.insert_value(value, element, index)
    return value


@intrinsic
def untracked_views(typingctx, value):
    """`value`, an array or a tuple of them (and of other values), of the same
    type, each array an untracked view: for a kernel that passes its
    arguments on at every step (a compiled function takes a reference to
    each array it is passed: an atomic increment, and a decrement as it
    returns). A borrowed array (compiled_calls.BorrowedArray: an
    ExactKernel's argument, untracked already) comes out typed as the plain
    array it is."""
    def codegen(context, builder, signature, args):
        return _untracked_value(context, builder, signature.args[0], args[0])
    return plain(value)(value), codegen


# The arrays every recursion starts from (kinematic_views): parent placements
# (R, p), motion subspaces S, world placements (world_R, world_p).
KinematicViews = namedtuple("KinematicViews", ("R", "p", "S", "world_R", "world_p"))


@njit(cache=True, inline="always")
def kinematic_views(buffer, n):
    """The KinematicViews at the start of `buffer`, and the offset where an
    algorithm's own arrays begin."""
    R, o = take(buffer, 0, (n, 3, 3))
    p, o = take(buffer, o, (n, 3))
    S, o = take(buffer, o, (n, 6, 6))
    world_R, o = take(buffer, o, (n, 3, 3))
    world_p, o = take(buffer, o, (n, 3))
    return KinematicViews(R, p, S, world_R, world_p), o
