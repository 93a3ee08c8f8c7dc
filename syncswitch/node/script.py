"""Load a user's training script and check it against the input_fn / model_fn contract."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import numbers
import os
import sys
import types

from syncswitch.errors import ScriptError

REQUIRED = {
    "input_fn": ("split", "batch_size", "params"),
    "model_fn": ("features", "labels", "params", "training"),
}


def load_script(path: str) -> types.ModuleType:
    """Import the script as a module; raise ScriptError naming the file on any problem."""
    if not os.path.isfile(path):
        raise ScriptError(f"script {path}: no such file")
    name = "syncswitch_user_script"
    # As `python train.py` would: the script's folder first on the path, for its helper modules.
    folder = os.path.dirname(os.path.abspath(path))
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: report whatever it raised, in one line
        raise ScriptError(f"script {path} raised on import: {type(exc).__name__}: {exc}") from exc
    for fn_name, args in REQUIRED.items():
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise ScriptError(f"script {path} must define {fn_name}({', '.join(args)})")
        try:
            inspect.signature(fn).bind(*args)
        except TypeError:
            raise ScriptError(f"script {path}: {fn_name} must accept ({', '.join(args)})") from None
    return module


def seed_random_state(seed: int) -> None:
    """Seed what a script's model draws its initial weights from, one way for a worker's graph and the simulator:
    Python's, numpy's and TensorFlow's random state (building a graph: that graph's seed) and Keras' own generator of
    the seeds of initializers made without one (its layers' defaults). Keras draws those from its generator, not
    from Python's random state, so what an input_fn takes from the latter (importing scikit-learn does) leaves the
    weights alone, and a worker draws the simulator's weights for the same seed."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed % 2**32)  # numpy's seeds are 32-bit


def num_train_examples(module, path: str, params: dict) -> int | None:
    """The script's `num_examples("train", params)` if it defines one."""
    return num_examples(module, path, "train", params)


def num_examples(module, path: str, split: str, params: dict) -> int | None:
    """The script's `num_examples(split, params)` if it defines one."""
    fn = getattr(module, "num_examples", None)
    if fn is None:
        return None
    try:
        n = fn(split, params)
    except Exception as exc:
        raise ScriptError(f"script {path}: num_examples({split!r}, params) raised {type(exc).__name__}: {exc}") from exc
    # numbers.Integral: a count from numpy (`y.shape[0]` of a loaded array, np.sum(...)) is as good as an int.
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n <= 0:
        raise ScriptError(f"script {path}: num_examples({split!r}, params) returned {n!r}, expected a positive int")
    return int(n)


def finite_test_set(ds, module, path: str, params: dict, batch_size: int):
    """The test split as the evaluator reads it, once: a script that repeats it (one input_fn for both splits)
    is cut at num_examples('test'), which it must then define; an evaluation would otherwise never end."""
    n = num_examples(module, path, "test", params)
    if n is None:
        raise ScriptError(f"script {path}: input_fn('test', ...) repeats forever, so no evaluation would end; "
                          "do not repeat the test split, or define num_examples('test', params)")
    return ds.unbatch().take(n).batch(batch_size)


# What eager-only calls raise in a TF1 graph, and what a script does instead. syncswitch builds v1 graphs (the
# parameter-server runtime), where the Keras guides' `adapt` and a tensor's `.numpy()` have no value to work on.
GRAPH_HINTS = (
    ("only supported in tensorflow v2", "syncswitch builds TF1 graphs (TensorFlow's parameter-server runtime), "
     "where a Keras preprocessing layer cannot adapt: give it what adapt would learn, computed with numpy "
     "(TextVectorization(vocabulary=...), StringLookup(vocabulary=...), Normalization(mean=..., variance=...))"),
    ("object has no attribute 'numpy'", "syncswitch builds TF1 graphs (TensorFlow's parameter-server runtime), "
     "where a tensor has no value while input_fn and model_fn run: compute such values with numpy"),
)


def graph_hint(exc: Exception) -> str:
    """'; what to do instead' for an error an eager-only call raises in a TF1 graph; empty for any other."""
    text = str(exc)
    return next((f"; {hint}" for mark, hint in GRAPH_HINTS if mark in text), "")


def call_input_fn(module, path: str, split: str, batch_size: int, params: dict, feeds: dict | None = None):
    """The script's dataset for `split`, checked. With `feeds`, large arrays it gives tf.data are placeholders (kept out
    of the graph, node/array_feeds.py): `feeds` gains what to feed them when the iterator is initialized."""
    import tensorflow as tf

    from syncswitch.node import array_feeds

    try:
        with array_feeds.lifted(feeds) if feeds is not None else contextlib.nullcontext():
            ds = module.input_fn(split, batch_size, params)
    except Exception as exc:
        raise ScriptError(f"script {path}: input_fn({split!r}, {batch_size}, params) raised "
                          f"{type(exc).__name__}: {exc}{graph_hint(exc)}") from exc
    if not isinstance(ds, tf.data.Dataset):
        raise ScriptError(f"script {path}: input_fn({split!r}, ...) returned {type(ds).__name__}, "
                          "expected a tf.data.Dataset of (features, labels) batches")
    spec = ds.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise ScriptError(f"script {path}: input_fn({split!r}, ...) must yield (features, labels) pairs, "
                          f"got elements {spec}")
    return ds


def call_model_fn(module, path: str, features, labels, params: dict, training: bool) -> dict:
    try:
        out = module.model_fn(features, labels, params, training)
    except Exception as exc:
        raise ScriptError(f"script {path}: model_fn(..., training={training}) raised "
                          f"{type(exc).__name__}: {exc}{graph_hint(exc)}") from exc
    if not isinstance(out, dict) or "loss" not in out or "logits" not in out:
        raise ScriptError(f"script {path}: model_fn must return a dict with 'loss' and 'logits', "
                          f"got {type(out).__name__}{sorted(out) if isinstance(out, dict) else ''}")
    loss, logits = out["loss"], out["logits"]
    if loss.shape.rank not in (0, None):
        raise ScriptError(f"script {path}: model_fn 'loss' must be a scalar, got shape {loss.shape}")
    if logits.shape.rank not in (1, 2, None):
        raise ScriptError(f"script {path}: model_fn 'logits' must be [batch, classes] (or [batch], one binary "
                          f"logit), got shape {logits.shape}")
    return out
