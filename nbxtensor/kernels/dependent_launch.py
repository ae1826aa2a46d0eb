"""Programmatic dependent launch (Hopper on): a kernel launched with the attribute may start while the
kernel before it on the stream still runs, so a kernel opts in through its ``PDL`` constexpr, whose
prologue below every such kernel calls first.

Why ordering stays stream order. ``launch.py`` gives a launch the attribute exactly when its ``PDL``
constexpr is true, and a kernel with ``PDL`` true runs ``griddepcontrol.wait`` at the top of every program,
before any load or store and before any branch: the wait returns once every kernel the launch depends on
has completed and its writes are visible. So the kernel reads nothing a predecessor is still writing and
overwrites nothing a predecessor is still reading. Completion is transitive: the predecessor completed
only after its own wait (or, launched without the attribute, only after its own predecessor), so the
kernel also sees everything issued before. A kernel launched with the attribute that never waited would
break that chain for every kernel after it; hence the attribute never goes without the constexpr.

``griddepcontrol.launch_dependents`` lets the next kernel's programs be scheduled once every program of
this one has issued it; it changes when they start, never what they may touch (they wait as above), so
it comes right after the wait: the next kernel's programs then take SM slots as this kernel's last wave
drains instead of after it has ended. Under the interpreter, and on devices whose facts lack
``programmatic_dependent_launch``, ``PDL`` is false and neither instruction is traced.
"""
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def await_predecessors(PDL: tl.constexpr):
    """The prologue of a kernel that takes ``PDL``: call it first, before any load, store or branch."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
