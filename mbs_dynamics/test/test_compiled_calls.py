"""The numba internals that compiled_calls relies on (numba is pinned): each
test names the hook it checks, so that a numba upgrade that changes one
fails here, saying which, rather than as a slow, recompiling or wrong call
elsewhere (the per-call fast paths, inputs.ExactKernel, and contact_step)."""
import copy
import functools
import inspect
import sys

import numpy as np
import pytest
from numba import njit, types
from numba.core import cgutils, inline_closurecall, ir
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

import mbs_dynamics as mbs
from helpers import chain
from mbs_dynamics import compiled_calls
from mbs_dynamics.inputs import RESULT, VECTOR, ExactKernel, exact, unit_stride
from mbs_dynamics.multibody.workspace import (FLOATS_FIXED, FLOATS_PER_BODY, STACK_SCRATCH_FLOATS, call_scratch,
                                              untracked_views)


def _total(x, out):
    out[0] = x.sum()
    return x.shape[0]


def test_numba_still_has_the_dispatcher_hooks():
    for hook in ("_search_new_conversions", "_explain_matching_error"):
        assert callable(getattr(Dispatcher, hook, None)), \
            f"numba's Dispatcher no longer has {hook}: compiled_calls.exact_dispatcher replaces it"
    dispatcher = njit(_total)
    assert callable(getattr(dispatcher.typingctx, "install_possible_conversions", None)), \
        "numba's typing context no longer has install_possible_conversions (compiled_calls.exact_dispatcher)"
    assert isinstance(dispatcher.overloads, dict), "numba's Dispatcher.overloads is no longer a dict"


def _first_elements(buffer, shape):
    size = 1
    for extent in shape:
        size *= extent
    return buffer[:size].reshape(shape).sum()


def test_a_plain_argument_types_dispatcher_compiles_once_for_constants_and_variables():
    """plain_argument_types replaces numba's Dispatcher.get_call_template: a kernel that calls it with a constant
    shape, another shape, and a variable one compiles it once (numba would for each literal shape: three times),
    and each call computes as without it."""
    assert callable(getattr(Dispatcher, "get_call_template", None)), \
        "numba's Dispatcher no longer has get_call_template: compiled_calls.plain_argument_types replaces it"
    plain = compiled_calls.plain_argument_types(njit(_first_elements))
    literal = njit(_first_elements)

    def calls(elements):
        @njit
        def kernel(buffer, n):
            return elements(buffer, (2, 3)), elements(buffer, (3, 2)), elements(buffer, (n, 2)), elements(buffer, (4,))
        return kernel

    buffer = np.arange(12.0)
    assert calls(plain)(buffer, 5) == calls(literal)(buffer, 5) == (15.0, 15.0, 45.0, 6.0)
    assert len(plain.signatures) == 2 and len(literal.signatures) == 4  # (one per number of dimensions)


def test_an_exact_dispatcher_takes_its_types_and_refuses_others_without_compiling():
    """One signature (a read-only float64 vector), which a writable one
    converts to; every other type raises the hooks' TypeError: numba's C
    dispatcher called them instead of compiling or explaining."""
    dispatcher = compiled_calls.exact_dispatcher(_total, types.int64(VECTOR, RESULT),
                                                 [(types.Array(types.float64, 1, "C"), VECTOR)])
    out = np.zeros(1)
    readonly = np.arange(4.0)
    readonly.setflags(write=False)
    for x in (np.arange(4.0), readonly):
        out[0] = 0.0
        assert dispatcher(x, out) == 4 and out[0] == 6.0
    for other in (np.arange(4, dtype=np.float32), [0.0, 1.0], np.zeros((2, 2)), np.arange(8.0)[::2], 3.0):
        with pytest.raises(TypeError, match="the arguments are not of the kernel's types"):
            dispatcher(other, out)
    assert len(dispatcher.signatures) == 1, "an exact dispatcher compiled another version: the hooks were not called"


def _stride(x, out):
    out[0] = x.strides[0]
    return unit_stride(x)


def test_an_exact_kernel_calls_its_compiled_entry_which_reads_the_arrays_strides():
    """ExactKernel.entry is the compiled entry of its one signature after the
    first call (not numba's dispatcher), and the entry reads a vector's
    stride as the array has it although the type says contiguous: what
    unit_stride (vectors_fit) refuses a strided vector by, as inputs.exact
    lets it through."""
    kernel = ExactKernel(_stride, types.boolean, VECTOR, RESULT)
    out = np.zeros(1)
    assert kernel.entry(np.arange(4.0), out) and out[0] == 8
    assert kernel.entry is not kernel.call and len(kernel.call.signatures) == 1, \
        "numba's Dispatcher.overloads[types].entry_point is gone: ExactKernel calls the dispatcher (about 0.1 µs " \
        "slower a call)"
    strided = np.arange(8.0)[::2]
    assert exact(strided)
    assert not kernel.entry(strided, out) and out[0] == 16, \
        "numba no longer reads the strides of a 'C' array from the array: a strided vector would be misread"
    readonly = np.arange(3.0)
    readonly.setflags(write=False)
    assert kernel.entry(readonly, out) and kernel.entry(np.arange(8.0)[::8], out)  # one element: any stride
    other_kernel, namespace = ExactKernel(_stride, types.boolean, VECTOR, RESULT), {}
    namespace["stride"] = other_kernel.entry_global(namespace, "stride")  # a module's global, before the first call
    assert namespace["stride"](np.arange(4.0), out) and out[0] == 8
    assert namespace["stride"] is other_kernel.entry and other_kernel.entry is not other_kernel.call, \
        "entry_global left its first-call function in the global's place, not the compiled entry"
    assert not namespace["stride"](strided, out) and out[0] == 16
    for other in (np.arange(4, dtype=np.float32), [0.0, 1.0], np.zeros((2, 2)), np.arange(4), 3.0,
                  np.arange(4.0).astype(">f8"), np.arange(4.0).view(np.matrix)):
        assert not exact(other), other


@intrinsic
def _tracked(typingctx, array):
    """True when `array` carries a MemInfo of numba's runtime (a reference it counts)."""
    def codegen(context, builder, signature, args):
        array_value = context.make_array(signature.args[0])(context, builder, value=args[0])
        return cgutils.is_not_null(builder, array_value.meminfo)
    return types.boolean(array), codegen


def _sum_into(x, out):
    tracked = _tracked(x) or _tracked(out)
    x, out = untracked_views((x, out))
    out[0] = x.sum()
    return tracked


def test_an_exact_kernels_arrays_are_borrowed_without_a_reference_and_read_and_written_as_arrays():
    """compiled_calls.BorrowedArray: an ExactKernel's array arguments reach its function without a MemInfo (numba
    unboxes a plain array argument into a new one: the same function compiled plainly shows it), by its entry and
    by its dispatcher (which converts a user's writable or read-only array to the borrowed type); the values are
    read and the result written as before, no reference is left behind, and what is not an array is refused."""
    plain = njit(types.boolean(VECTOR, RESULT))(_sum_into)
    kernel = ExactKernel(_sum_into, types.boolean, VECTOR, RESULT)
    x, out = np.arange(5.0), np.zeros(1)
    assert plain(x, out) and out[0] == 10.0, "numba no longer unboxes a plain array with a MemInfo"
    assert all(isinstance(argument, compiled_calls.BorrowedArray) for argument in kernel.signature.args)
    readonly = np.arange(4.0)
    readonly.setflags(write=False)
    for call in (kernel.entry, kernel.call, kernel.entry):  # the first call compiles, then each way
        for vector, total in ((x, 10.0), (readonly, 6.0)):
            out[0] = 0.0
            assert not call(vector, out) and out[0] == total
    references = sys.getrefcount(x), sys.getrefcount(out)
    for _ in range(1000):
        kernel.entry(x, out)
        kernel.call(x, out)
    assert (sys.getrefcount(x), sys.getrefcount(out)) == references
    with pytest.raises(TypeError, match="a borrowed array argument is not an array"):
        kernel.entry(3.0, out)
    with pytest.raises(TypeError, match="the arguments are not of the kernel's types"):
        kernel.call(x[::2], out)  # a strided vector: typed as another layout, no conversion to the signature's


def test_plain_types_of_borrowed_arrays_keep_every_other_type_and_named_tuples_class():
    """compiled_calls.plain: a borrowed array's plain array; a tuple (named or not) without one unchanged, with one
    rebuilt of the same class (a named tuple made plain would be another signature of each kernel it reaches)."""
    from collections import namedtuple

    pair = namedtuple("Pair", ("first", "second"))
    vector = compiled_calls.borrowed(VECTOR)
    assert compiled_calls.plain(vector) == VECTOR and type(compiled_calls.plain(vector)) is types.Array
    named = types.NamedTuple((VECTOR, types.int64), pair)
    for unchanged in (VECTOR, types.int64, named, types.Tuple((named, RESULT))):
        assert compiled_calls.plain(unchanged) is unchanged
    assert compiled_calls.plain(types.NamedTuple((vector, types.int64), pair)) == named
    assert compiled_calls.plain(types.Tuple((types.NamedTuple((vector, types.int64), pair), RESULT))) == \
        types.Tuple((named, RESULT))


def test_borrowed_arrays_never_leave_the_exact_kernels():
    """Every per-call function's ExactKernel takes its borrowed arguments through untracked_views first thing:
    no compiled function of the package (a module's dispatcher) has a version for a borrowed type (a kernel
    that kept a borrowed array would outlive its owner's reference; one compiled for it would be a second
    version of a kernel the warm-up compiles in plain types)."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    coupled = chain("coupled")
    for robot in (model, coupled):
        q, v = robot.neutral_configuration(), np.full(robot.nv, 0.1)
        mbs.inverse_dynamics(robot, q, v, v)
        mbs.nonlinear_effects(robot, q, v)
        mbs.forward_dynamics(robot, q, v, v)
        mbs.mass_matrix(robot, q)
        mbs.centroidal_momentum(robot, q, v)
        mbs.centroidal_momentum_matrix(robot, q)
        mbs.frame_jacobian(robot, q, list(robot.frames)[-1])
    assert coupled.has_coupled_joints
    borrowing = [f"{module}.{name}({', '.join(map(str, signature))})" for module, namespace in list(sys.modules.items())
                 if module.startswith("mbs_dynamics") for name, value in list(vars(namespace).items())
                 if isinstance(value, Dispatcher) for signature in value.overloads
                 if any(isinstance(argument, compiled_calls.BorrowedArray) for argument in signature)]
    assert not borrowing


def test_a_compiled_entry_is_the_compiled_function_without_type_resolution():
    """The version the dispatcher ran: its only one (found without typing the
    arguments), or among several the one of the arguments' types."""
    dispatcher = njit(_total)
    records = np.zeros(3, dtype=[("a", np.float64), ("b", np.int64)])
    arguments = (records["a"].copy(), np.zeros(1))
    assert dispatcher(*arguments) == 3
    entry = compiled_calls.compiled_entry(dispatcher, arguments)
    assert entry is not dispatcher, \
        "numba's Dispatcher.overloads[types].entry_point is gone: compiled_calls.compiled_entry falls back to the " \
        "dispatcher (correct, a microsecond slower a call)"
    x, out = np.array([1.0, 2.0, 4.5]), np.zeros(1)
    assert entry(x, out) == 3 and out[0] == 7.5
    assert compiled_calls.compiled_entry(dispatcher, (x,)) is dispatcher  # not its arity
    # two versions: the one of the arguments' types
    integers = (np.arange(3), np.zeros(1, dtype=np.int64))
    assert dispatcher(*integers) == 3 and len(dispatcher.overloads) == 2
    integer_entry = compiled_calls.compiled_entry(dispatcher, integers)
    assert integer_entry is not dispatcher and integer_entry is not entry
    assert compiled_calls.compiled_entry(dispatcher, arguments) is entry
    out = np.zeros(1, dtype=np.int64)
    assert integer_entry(np.array([4, 5]), out) == 2 and out[0] == 9
    # types it has not compiled: the dispatcher itself, which compiles or refuses them
    assert compiled_calls.compiled_entry(dispatcher, (1.0, out)) is dispatcher
    assert compiled_calls.compiled_entry(print, arguments) is print


def test_a_signature_entry_is_compiled_for_the_types_given_and_reads_any_layout():
    """signature_entry compiles the version of the types given (vectors of
    any layout) where the dispatcher has none, and returns its entry, which
    reads a strided or read-only vector as it is."""
    dispatcher = njit(_total)
    any_vector = types.Array(types.float64, 1, "A")
    entry = compiled_calls.signature_entry(dispatcher, (any_vector, any_vector))
    assert list(dispatcher.overloads) == [(any_vector, any_vector)]
    assert compiled_calls.signature_entry(dispatcher, [any_vector, any_vector]) is entry  # compiled once
    strided, out = np.arange(8.0)[1::3], np.zeros(2)[::2]  # 1, 4, 7
    strided.setflags(write=False)
    assert entry(strided, out) == 3 and out[0] == 12.0


def _scaled_add(out, x, scale):
    if scale[0] < 0.0:
        raise ValueError("a negative scale")
    for i in range(out.shape[0]):
        out[i] += scale[0] * x[i]


@njit(nogil=True)
def _call_by_address(function, out, x, scale, times):
    for _ in range(times):
        compiled_calls.call_native(function, (out, x, scale))


def test_a_native_function_is_called_by_its_address_not_linked_in_and_checked_for_its_types():
    """call_native calls the version native_function resolved, by its address (numba's native function,
    `library.get_pointer_to_function(fndesc.llvm_func_name)`, its calling convention `call_conv`): it computes,
    raises its exceptions, is not compiled into its caller, and refuses other argument types."""
    callee = njit(_scaled_add)
    out, x, scale = np.zeros(3), np.arange(3.0), np.array([2.0])
    vector = types.Array(types.float64, 1, "C")
    function = compiled_calls.native_function(callee, (out, x, scale))
    assert list(callee.overloads) == [(vector, vector, vector)]
    _call_by_address(function, out, x, scale, 5)
    assert out.tolist() == [0.0, 10.0, 20.0]
    with pytest.raises(ValueError, match="a negative scale"):
        _call_by_address(function, out, x, -scale, 1)
    caller_ir = next(iter(_call_by_address.inspect_llvm().values()))
    name = callee.overloads[(vector, vector, vector)].fndesc.llvm_func_name
    assert f"@{name}" not in caller_ir and f'@"{name}"' not in caller_ir  # neither defined nor declared there
    read_only_scale = scale.copy()
    read_only_scale.setflags(write=False)
    read_only = compiled_calls.native_function(callee, (out, x, read_only_scale))
    with pytest.raises(TypeError, match="a compiled function called with arguments of other types"):
        _call_by_address(read_only, out, x, scale, 1)
    assert out.tolist() == [0.0, 10.0, 20.0]


@njit
def _fill_scratch(nbodies, value):
    """A call_scratch buffer filled with value, read back: its size * 1000 + the mean."""
    buffer = call_scratch(nbodies, FLOATS_PER_BODY)
    buffer[:] = value
    return buffer.shape[0] * 1000.0 + buffer.sum() / buffer.shape[0]


def test_a_calls_scratch_is_on_the_stack_when_small_and_on_the_heap_otherwise():
    """call_scratch has new_scratch's size on either side of STACK_SCRATCH_FLOATS,
    writable all through, a fresh buffer each call."""
    small, large = 2, STACK_SCRATCH_FLOATS // FLOATS_PER_BODY + 1
    assert small * FLOATS_PER_BODY + FLOATS_FIXED <= STACK_SCRATCH_FLOATS < large * FLOATS_PER_BODY + FLOATS_FIXED
    for nbodies in (small, large):
        size = nbodies * FLOATS_PER_BODY + FLOATS_FIXED
        for value in (1.0, 2.5):
            assert _fill_scratch(nbodies, value) == size * 1000.0 + value


@njit(inline="always")
def _scaled(x, k):
    y = 0.0
    for i in range(x.shape[0]):
        y += k * x[i]
    return y


@njit(inline="always")
def _twice_scaled(x, k):
    return _scaled(x, k) + _scaled(x, 2.0 * k)


def _inlining(x):
    return _twice_scaled(x, 1.0) - _twice_scaled(x, 0.5) * _scaled(x, 3.0)


def test_numba_still_inlines_through_the_hooked_worker():
    """share_inlined_scopes replaces InlineWorker.inline_function by one
    that does what numba's does (run_untyped_passes, then inline_ir) with
    the callee's scope answering copy.deepcopy with itself; mbs_dynamics
    installs it on import."""
    worker = inline_closurecall.InlineWorker
    assert worker.inline_function is compiled_calls._inline_function, \
        "importing mbs_dynamics did not install compiled_calls.share_inlined_scopes"
    source = inspect.getsource(compiled_calls.NUMBA_INLINE_FUNCTION)
    assert "callee_ir = self.run_untyped_passes(function)" in source \
        and "self.inline_ir(caller_ir, block, i, callee_ir, freevars" in source, \
        "numba's InlineWorker.inline_function changed: compiled_calls._inline_function replicates it"
    assert "copy.deepcopy(the_ir.blocks[block_label])" in inspect.getsource(worker.inline_ir), \
        "numba's InlineWorker.inline_ir no longer copies the IR block by block (compiled_calls.share_inlined_scopes)"
    scope = ir.Scope(None, ir.Loc("test", 1))
    variable = scope.define("x", ir.Loc("test", 1))
    scope.__deepcopy__ = functools.partial(compiled_calls._itself, scope)
    assert copy.deepcopy(variable).scope is scope, "copy.deepcopy no longer asks the instance for __deepcopy__"


def test_inlined_functions_compute_as_in_python():
    """Nested inline='always' functions at several call sites (the
    variables of each site renamed apart) give Python's result, bit for bit."""
    x = np.array([0.1, -2.5, 3.0, 1e-3])
    assert njit(_inlining)(x) == _inlining(x)


def test_inlined_blocks_give_back_numbas_copy(monkeypatch):
    """_inline_function has the callee's blocks answer copy.deepcopy with
    themselves only while inline_ir runs: the caller's IR, which numba may
    copy later, gets blocks that copy as numba's do."""
    inlined = []
    inline_ir = inline_closurecall.InlineWorker.inline_ir

    def recording_inline_ir(self, *arguments, **keywords):
        result = inline_ir(self, *arguments, **keywords)
        inlined.extend(block for _, block in result[3])
        return result

    monkeypatch.setattr(inline_closurecall.InlineWorker, "inline_ir", recording_inline_ir)
    x = np.array([0.5, 2.0, -1.0])
    assert njit(_inlining)(x) == _inlining(x)
    assert inlined and not any("__deepcopy__" in vars(block) for block in inlined)
    assert copy.deepcopy(inlined[0]) is not inlined[0]
