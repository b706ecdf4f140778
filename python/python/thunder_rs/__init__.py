"""thunder_rs: jit PyTorch functions and ``nn.Module``s with thunder-rs.

    import thunder_rs
    jm = thunder_rs.jit(model)        # or a function
    y = jm(x)                         # traced and compiled on the first call per signature
    thunder_rs.last_traces(jm)        # the printed traces of the last call's signature
    thunder_rs.compile_timings(jm)    # seconds per translation stage of that signature
    thunder_rs.examine(model, x)      # every torch call thunder_rs cannot run, with its line
    thunder_rs.plugins()              # the executors, as `thunder plugins` lists them

Executor plugins: ``$THUNDER_CONFIG`` (a plugins.toml) if set, else the ``plugins.toml`` and
``plugins/`` folder shipped in this package; ``$THUNDER_PLUGIN_DIR`` adds folders.
"""

import os as _os

from . import _native

_native.set_default_config(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins.toml"))

from ._jit import JittedFunction, examine, jit  # noqa: E402
from ._trace import UnsupportedOpError  # noqa: E402


def last_traces(jfn):
    """The printed traces of the last call's signature: the initial trace, one per pass and the
    execution trace (for a differentiated call: the joint trace, the forward's stages, then the
    backward's)."""
    if not isinstance(jfn, JittedFunction):
        raise TypeError("thunder_rs.last_traces: expected a function returned by thunder_rs.jit")
    return jfn.last_traces()


def compile_timings(jfn, detail=False):
    """Seconds spent translating the last call's signature, per stage, in order: the Python
    trace, then thunder-core's stages (for a differentiated call: the joint trace and VJP, the
    forward/backward split, then each side's passes + claims + compile, which includes the
    executors' kernel compilation or kernel-cache reads). Their sum is the translation time.

    With ``detail=True``, each side's "passes + claims + compile" split further, as
    ``[(side, stage, seconds)]``: ``passes``, ``executors``, ``claim``, then
    ``compile NAME (N regions)`` per executor, then ``compile, elapsed (T threads)``. Regions
    compile on several threads (``THUNDER_COMPILE_THREADS``, default the cores up to 8): an
    executor's seconds are its compiles' summed over the threads, the elapsed line the time
    they took together."""
    if not isinstance(jfn, JittedFunction):
        raise TypeError("thunder_rs.compile_timings: expected a function returned by thunder_rs.jit")
    return jfn.last_compile_timings(detail=detail)


def graph_stats(jfn):
    """What CUDA-graph replay did for the last call's signature, per side (``forward``,
    ``backward``): ``captures``, ``graph_runs`` (calls served by one graph launch),
    ``eager_runs`` (calls run region by region) and ``off`` (replay turned off after a failed
    capture). Empty when the program does not replay: not all on one CUDA device, or turned off
    by ``cuda_graphs = false`` in plugins.toml or ``THUNDER_CUDA_GRAPHS=0``."""
    if not isinstance(jfn, JittedFunction):
        raise TypeError("thunder_rs.graph_stats: expected a function returned by thunder_rs.jit")
    return jfn.last_graph_stats()


def plugins():
    """The executor plugins: ``{"executors": [...], "load_errors": [...]}``."""
    return _native.plugins()


__all__ = ["jit", "examine", "last_traces", "compile_timings", "graph_stats", "plugins", "UnsupportedOpError", "JittedFunction"]
