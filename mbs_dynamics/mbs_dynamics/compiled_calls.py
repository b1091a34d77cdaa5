"""Calls of numba-compiled functions from Python without numba's per-call
type resolution, and a faster compile of inlined functions: the one module
that relies on numba's private dispatcher and compiler internals (numba is
pinned in constraints.txt, 0.68.1; test_compiled_calls fails, naming the
hook, when an upgrade changes one of them).

Why: numba's dispatcher looks up the compiled version for the types of a
call's arguments on every call: about 70 ns and 10 ns an argument for
float64 arrays, about a microsecond for each structured array or tuple of
arrays (a typeof in Python); for arguments of a type it has not compiled it
compiles another version (seconds), or, where it may not compile, explains
the mismatch (some 100 us). The per-call paths avoid these:

* exact_dispatcher (inputs.ExactKernel.call: the one-state fast paths of
  several user vectors): a dispatcher compiled for one signature, which
  refuses arguments of other types with a TypeError in about a microsecond.
  It replaces, on the instance, the two methods numba's C dispatcher
  (numba/_dispatcher.cpp) calls back when no compiled signature matches and
  it may not compile: `_search_new_conversions` (which would look for
  conversions to install and retry) and `_explain_matching_error` (which
  would type every argument to word the error); and it registers with
  `typingctx.install_possible_conversions` the conversions the C dispatcher
  may apply itself (a writable array where the signature has a read-only
  one).
* compiled_entry (inputs.ExactKernel.entry: the fast paths of one user
  vector) and signature_entry (contact_step's kept set-up, compiled for
  arguments of any layout): the compiled version's CPython wrapper,
  `Dispatcher.overloads[argument types].entry_point` (numba's
  CompileResult), called directly: no type resolution at all. That wrapper
  unboxes its arguments as the types it was compiled for WITHOUT checking
  them (an array of another dtype is read as if it were right; one of more
  dimensions writes its extra shape past the struct's), so its callers pass
  only arrays they made themselves or checked to be of exactly those types
  (inputs.exact: about as long as the dispatcher's look-up for one vector,
  longer for several).

* BorrowedArray (the argument types of inputs.ExactKernel): an array
  argument unboxed without a reference of numba's runtime. numba unboxes
  an array by wrapping it in a new MemInfo (a malloc, a reference taken,
  both undone as the call returns: some 20 ns an array, 60 of a UR5's
  centroidal momentum matrix call of three); a borrowed one is read by
  numba's own adaptor for its runtime-free mode (`numba_adapt_ndarray`
  of its helper library: data, shape and strides, meminfo null), the
  same struct as untracked_views' views. The caller's arguments live
  until the call returns, so a function that borrows them must not keep
  or return them: it converts them to plain array types first thing
  (workspace.untracked_views), and nothing after it sees a borrowed type.

For compile time, plain_argument_types: a compiled function that other
kernels call with constants (an offset 0, a shape (n, 6)) compiled once
per plain type of its arguments, not once per constant: numba types a
call's constant arguments as literals, and the dispatcher's
`get_call_template` (which types a call from compiled code, compiling a
version for it) is replaced, on the instance, by one that takes their
plain types (types.unliteral); the call's constants are cast to them.

For compile time too, native_function and call_native: compiled code that
calls a compiled function by its address, not linking it in. numba links a
callee's LLVM module into its caller's library and optimises and compiles
the whole again (the rollouts' loop around the simulation's step: 11 CPU-s
of LLVM for a loop of a second's compile). Called by its address, the
callee's own machine code runs (the caller's compile is its own alone). The
callee is numba's native version (its calling convention: a status, the
exception raised, arguments as their data models lay them out) for the
argument types it was compiled for: the caller passes exactly those, and
call_native checks it (their hash, given with the address) before the call.

And one hook of numba's compiler, for compile time (share_inlined_scopes):
the inline='always' pass copies an inlined function's IR block by block,
each block with a copy of the function's scope, which holds all its
variables; the copies share it instead.
"""
import functools
import hashlib
from typing import NamedTuple

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, inline_closurecall
from numba.core.datamodel.models import ArrayModel
from numba.extending import NativeValue, intrinsic, register_model, unbox


def _no_match(*args, **kws):
    raise TypeError("the arguments are not of the kernel's types")


def _no_conversions(*args, **kws):
    return False


def exact_dispatcher(function, signature, conversions=()):
    """`function` compiled (or loaded from numba's cache) for `signature`
    alone; a call with arguments of other types raises TypeError ("the
    arguments are not of the kernel's types") without compiling or typing
    them. conversions: (from type, to type) pairs the dispatcher applies
    (e.g. a writable array to the signature's read-only one)."""
    dispatcher = njit(signature, cache=True)(function)
    dispatcher._search_new_conversions = _no_conversions
    dispatcher._explain_matching_error = _no_match
    for from_type, to_type in conversions:
        dispatcher.typingctx.install_possible_conversions([from_type], [to_type])
    return dispatcher


class BorrowedArray(types.Array):
    """An array argument unboxed without a reference (module docstring):
    typed and laid out as the types.Array of the same dtype, dimensions,
    layout and mutability, which `plain` gives (and numba's views of it
    are: Array.copy makes plain arrays)."""

    def __init__(self, dtype, ndim, layout, readonly=False, aligned=True):
        super().__init__(dtype, ndim, layout, readonly=readonly, aligned=aligned,
                         name=f"borrowed {'readonly ' if readonly else ''}array({dtype}, {ndim}d, {layout})")


register_model(BorrowedArray)(ArrayModel)


def borrowed(array_type: types.Array) -> BorrowedArray:
    """The BorrowedArray of the plain array type `array_type`."""
    return BorrowedArray(array_type.dtype, array_type.ndim, array_type.layout, readonly=not array_type.mutable,
                         aligned=array_type.aligned)


def plain(value_type):
    """The plain type of a BorrowedArray; a tuple's with each element's (a
    named tuple's of its class); any other type, and a tuple without a
    borrowed array, as it is (a rebuilt named tuple would be a plain tuple:
    another signature of every kernel it is passed to)."""
    if isinstance(value_type, BorrowedArray):
        return types.Array(value_type.dtype, value_type.ndim, value_type.layout, readonly=not value_type.mutable,
                           aligned=value_type.aligned)
    if isinstance(value_type, types.BaseTuple):
        elements = [plain(element) for element in value_type]
        if elements == list(value_type):
            return value_type
        return types.BaseTuple.from_types(elements, getattr(value_type, "instance_class", None))
    return value_type


@unbox(BorrowedArray)
def _unbox_borrowed(array_type, obj, c):
    """numba's unbox_array (numba/core/boxing.py) with its runtime-free adaptor."""
    array = c.context.make_array(array_type)(c.context, c.builder)
    pointer = array._getpointer()
    adapt = c.pyapi._get_function(ir.FunctionType(ir.IntType(32), [c.pyapi.pyobj, c.pyapi.voidptr]),
                                  name="numba_adapt_ndarray")
    failed = cgutils.is_not_null(c.builder, c.builder.call(adapt, (obj, c.builder.bitcast(pointer, c.pyapi.voidptr))))
    with c.builder.if_then(failed, likely=False):
        c.pyapi.err_set_string("PyExc_TypeError", "a borrowed array argument is not an array")
    return NativeValue(c.builder.load(pointer), is_error=failed)


def plain_argument_types(dispatcher):
    """`dispatcher` (a compiled function, numba's Dispatcher), compiled for
    calls from compiled code in the plain types of their arguments (module
    docstring): workspace.take was compiled once per literal shape a kernel
    lays out (28 versions, take_unchecked 42), gjk.triangle_nearest for the
    constant indices (0, 1, 2) and again for variables. The compiled code
    computes the same (the constants are the same values); it is only not
    specialised for them before LLVM sees them."""
    call_template = dispatcher.get_call_template

    def plain_call_template(argument_types, keyword_types):
        return call_template(tuple(types.unliteral(argument) for argument in argument_types),
                             {name: types.unliteral(argument) for name, argument in keyword_types.items()})

    dispatcher.get_call_template = plain_call_template
    return dispatcher


def compiled_entry(dispatcher, arguments):
    """The compiled function `dispatcher` ran for `arguments` in a call just
    made with them, callable without type resolution (module docstring:
    only with arguments of exactly those types). Where the dispatcher has
    one version, that one (it ran it: the C dispatcher calls the same entry
    with the same arguments); otherwise the version for the arguments'
    types, found by typing them (numba's typeof: up to a millisecond for
    structured arrays and tuples of them). The dispatcher itself where it
    has no such version or keeps its versions otherwise."""
    try:
        overloads = dispatcher.overloads
        if len(overloads) == 1:
            (signature, version), = overloads.items()
            return version.entry_point if len(signature) == len(arguments) else dispatcher
        return overloads[tuple(dispatcher.typeof_pyval(argument) for argument in arguments)].entry_point
    except (AttributeError, KeyError):
        return dispatcher


def signature_entry(dispatcher, argument_types):
    """The compiled entry (compiled_entry's) of `dispatcher`'s version for
    the numba types `argument_types`, compiled (or loaded from numba's
    cache) where it has none: for arguments typeof would type otherwise
    (arrays of any layout, types.Array(..., "A"), where typeof says "C")."""
    argument_types = tuple(argument_types)
    if argument_types not in dispatcher.overloads:
        dispatcher.compile(argument_types)
    return dispatcher.overloads[argument_types].entry_point


# --- calling a compiled function by its address ------------------------------------------------------------------


class NativeFunction(NamedTuple):
    """A compiled version of a numba function, for call_native: the address
    of its native function and signature_key(its argument types)."""

    address: int
    signature: int


def signature_key(argument_types) -> int:
    """A 56-bit hash of the numba types `argument_types` (their names, which
    spell out every field of a record, every element of a tuple)."""
    return int.from_bytes(hashlib.sha256(str(tuple(argument_types)).encode()).digest()[:7], "little")


def native_function(dispatcher, arguments) -> NativeFunction:
    """The NativeFunction of `dispatcher`'s version for `arguments`, typed as
    its call from Python types them (the version such a call runs),
    compiled (or loaded from numba's cache) where it has none. It lives as
    long as the dispatcher (a module's function: the process)."""
    argument_types = tuple(dispatcher.typeof_pyval(argument) for argument in arguments)
    if argument_types not in dispatcher.overloads:
        dispatcher.compile(argument_types)
    version = dispatcher.overloads[argument_types]
    address = version.library.get_pointer_to_function(version.fndesc.llvm_func_name)
    if not address:
        raise RuntimeError(f"numba has no native function of {dispatcher.py_func.__qualname__}{argument_types}")
    return NativeFunction(address, signature_key(argument_types))


@intrinsic
def call_native(typingctx, function, arguments):
    """function(*arguments) from compiled code, `function` a NativeFunction
    (of a compiled function that returns None) called by its address; an
    exception it raises propagates. Arguments of other types than it was
    compiled for raise TypeError instead of calling it."""
    if not (isinstance(function, types.NamedUniTuple) and function.instance_class is NativeFunction
            and isinstance(arguments, types.BaseTuple)):
        return None
    argument_types = tuple(arguments)
    key = signature_key(argument_types)

    def codegen(context, builder, signature, values):
        address, given_key = cgutils.unpack_tuple(builder, values[0], 2)
        with builder.if_then(builder.icmp_unsigned("!=", given_key, ir.Constant(given_key.type, key)), likely=False):
            context.call_conv.return_user_exc(builder, TypeError,
                                              ("a compiled function called with arguments of other types",))
        function_type = context.call_conv.get_function_type(types.none, argument_types)
        callee = builder.inttoptr(address, function_type.as_pointer())
        status, _ = context.call_conv.call_function(builder, callee, types.none, argument_types,
                                                    cgutils.unpack_tuple(builder, values[1], len(argument_types)))
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(function, arguments), codegen


# --- compiling: an inlined function's IR copied without its scope -------------------------------------------------


NUMBA_INLINE_FUNCTION = inline_closurecall.InlineWorker.inline_function  # what _inline_function replaces


def _inline_function(self, caller_ir, block, i, function, arg_typs=None):
    """numba's InlineWorker.inline_function (inline='always', at one call
    site), but for the copies of the callee's IR that inline_ir makes before
    changing it (two, block by block): these share the callee's scope rather
    than copy it with each block. A scope holds every variable of the
    function, so the copies took time in the blocks times the variables:
    half of the compile of a kernel that inlines its per-body steps (the
    mass matrix's 15 CPU-s). The IR is made afresh at each call site and
    dropped after: nothing else sees the shared scope, and inline_ir
    replaces every variable of it with one of the caller's scope. The
    blocks are not copied either (the first copy is of IR nothing else
    holds, the second is returned unchanged to a caller that drops it:
    simulation's step 163.5 -> 151.1 CPU-s, the same LLVM IR with one hash
    seed), and give back numba's copy once they are the caller's."""
    callee_ir = self.run_untyped_passes(function)
    callee_blocks = list(callee_ir.blocks.values())
    for shared in {id(callee_block.scope): callee_block.scope for callee_block in callee_blocks}.values():
        shared.__deepcopy__ = functools.partial(_itself, shared)  # copy.deepcopy asks the instance
    for callee_block in callee_blocks:
        callee_block.__deepcopy__ = functools.partial(_itself, callee_block)
    try:
        return self.inline_ir(caller_ir, block, i, callee_ir, function.__code__.co_freevars, arg_typs=arg_typs)
    finally:  # the blocks now belong to the caller, whose IR numba may copy
        for callee_block in callee_blocks:
            del callee_block.__deepcopy__


def _itself(scope, memo):
    return scope


def share_inlined_scopes():
    """Installs _inline_function in numba's InlineWorker (the inline='always'
    pass, InlineInlinables, calls it): mbs_dynamics/__init__.py does, before
    anything compiles. The compiled code is the same (tests: the results
    to the last bit)."""
    inline_closurecall.InlineWorker.inline_function = _inline_function
