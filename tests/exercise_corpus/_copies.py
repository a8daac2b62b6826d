"""Copies of a refused accumlab function, made as a learner could make them before `al.check`
runs: the corpus answers of 04.3, 04.4, 12.3 and 13.1 that must still be refused."""

import inspect
import sys
import types


def copied_before(fn):
    """`fn` rebuilt from its code object by a cell that runs before the check: a new function
    object, so a guard on accumlab's binding of `fn` does not reach it."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def compiled_from_source(obj):
    """A function or class compiled again from its source text into a copy of its module's
    globals: new code objects, which a guard on accumlab's own never reaches."""
    scope = dict(vars(sys.modules[obj.__module__]))
    exec(inspect.getsource(obj), scope)
    return scope[obj.__name__]
