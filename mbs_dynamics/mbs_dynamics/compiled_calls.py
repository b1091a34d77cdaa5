"""Calls of numba-compiled functions from Python without numba's per-call
type resolution: the one module that relies on numba's private dispatcher
internals (numba is pinned in constraints.txt, 0.68.1; test_compiled_calls
fails, naming the hook, when an upgrade changes it).

Why: numba's dispatcher looks up the compiled version for the types of a
call's arguments on every call: about 0.1 us for float64 arrays (a quarter
of a microsecond for a vector that converts to a read-only one), about a
microsecond for each structured array or tuple of arrays (a typeof in
Python), and compiles another version for arguments of a type it has not
compiled (seconds). The per-call paths (inputs.ExactKernel, contact_step)
call instead the compiled version's CPython wrapper,
`Dispatcher.overloads[argument types].entry_point` (numba's CompileResult):
no type resolution at all. That wrapper unboxes its arguments as the types
it was compiled for WITHOUT checking them (an array of another dtype is
read as if it were right; one of more dimensions writes its extra shape
past the struct's), so its callers pass only arrays they made themselves
or checked to be of exactly those types (inputs.exact).
"""


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
