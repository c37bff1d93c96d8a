"""``fl.load`` on damaged, foreign and newer files: every failure is a ``ValueError`` naming the file (and the
field), and whatever loads is a valid result."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import flowlib as fl
from flowlib import examples


def _arrays(path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _rewrite(source, target, meta=None, meta_text=None, **arrays):
    """Copy the saved result ``source`` to ``target`` with metadata fields (a dict: updated; anything else: the
    whole metadata) or the metadata text, and arrays, replaced (an array given as None is deleted)."""
    content = _arrays(source)
    if meta is not None:
        fields = json.loads(str(content["meta"]))
        meta_text = json.dumps({**fields, **meta} if isinstance(meta, dict) else meta)
    if meta_text is not None:
        content["meta"] = np.array(meta_text)
    for name, value in arrays.items():
        if value is None:
            content.pop(name, None)
        else:
            content[name] = value
    np.savez(target, **content)
    return target


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One saved file of each kind: float64 flow (with events), mpmath flow, float64 and mpmath GD, ensemble."""
    folder = tmp_path_factory.mktemp("saved")
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    inits = fl.random_inits(prob, m=2, count=6, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)
    return {"flow": fl.gradient_flow(prob, p0, 400.0, t_eval=[1.0]).save(folder / "flow.npz"),
            "flow_mp": fl.gradient_flow(prob, p0, 2.0, dps=20).save(folder / "flow_mp.npz"),
            "gd": fl.gradient_descent(prob, p0, 0.5, 900, record_every=7).save(folder / "gd.npz"),
            "gd_mp": fl.gradient_descent(prob, p0, 0.5, 20, dps=20, record_every=3).save(folder / "gd_mp.npz"),
            "ensemble": fl.ensemble(prob, inits, "gd", lr=0.05, steps=300).save(folder / "ensemble.npz")}


def test_saved_files_load(saved):
    flow = fl.load(saved["flow"])
    assert flow.n_events > 0 and flow.n_steps > 0
    assert fl.load(saved["gd"]).n_flips > 0 and len(fl.load(saved["ensemble"])) == 6


def _refused(path, *words):
    with pytest.raises(ValueError) as info:
        fl.load(path)
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message
    return message


def test_truncated_file(saved, tmp_path):
    path = tmp_path / "cut.npz"
    path.write_bytes(saved["flow"].read_bytes()[:300])
    _refused(path, ".npz")


def test_npy_file(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros(3))
    _refused(path, ".npy")


def test_empty_and_text_files(tmp_path):
    for name, content in (("empty.npz", b""), ("text.npz", b"hello, world\n")):
        (tmp_path / name).write_bytes(content)
        _refused(tmp_path / name)


def test_metadata_not_an_object(saved, tmp_path):
    _refused(_rewrite(saved["flow"], tmp_path / "x.npz", meta=[1, 2, 3]), "metadata", "JSON object")


def test_metadata_not_json(saved, tmp_path):
    _refused(_rewrite(saved["gd"], tmp_path / "x.npz", meta_text="{not json"), "metadata")


@pytest.mark.parametrize("kind, array", [("flow", "loss"), ("flow", "event_neuron"), ("gd", "flip_k"),
                                         ("gd", "iterations"), ("ensemble", "status_code")])
def test_missing_array(saved, tmp_path, kind, array):
    _refused(_rewrite(saved[kind], tmp_path / "x.npz", **{array: None}), f"array {array!r}", "missing")


@pytest.mark.parametrize("kind", ["flow", "gd"])
def test_extra_problem_key(saved, tmp_path, kind):
    problem = json.loads(str(_arrays(saved[kind])["meta"]))["problem"]
    _refused(_rewrite(saved[kind], tmp_path / "x.npz", meta={"problem": dict(problem, colour="red")}), "problem",
             "colour")


@pytest.mark.parametrize("kind", ["flow", "gd", "ensemble"])
def test_newer_schema_is_refused(saved, tmp_path, kind):
    _refused(_rewrite(saved[kind], tmp_path / "x.npz", meta={"schema": 2}), "schema", "newer")


@pytest.mark.parametrize("kind", ["flow", "gd"])
def test_newer_flowlib_is_refused(saved, tmp_path, kind):
    _refused(_rewrite(saved[kind], tmp_path / "x.npz", meta={"flowlib": "9.9.9"}), "9.9.9", "newer")


def test_newer_flowlib_ensemble_is_refused(saved, tmp_path):
    inner = json.loads(str(_arrays(saved["ensemble"])["meta"]))["meta"]
    inner["versions"]["flowlib"] = "9.9.9"
    _refused(_rewrite(saved["ensemble"], tmp_path / "x.npz", meta={"meta": inner}), "9.9.9", "newer")


def test_older_version_loads(saved, tmp_path):
    assert fl.load(_rewrite(saved["flow"], tmp_path / "x.npz", meta={"flowlib": "0.0.1"})).n_steps > 0


@pytest.mark.parametrize("kind, array", [("flow", "states"), ("flow", "coefficients"), ("gd", "states"),
                                         ("ensemble", "final")])
def test_states_of_the_wrong_shape(saved, tmp_path, kind, array):
    value = _arrays(saved[kind])[array]
    _refused(_rewrite(saved[kind], tmp_path / "x.npz", **{array: value[..., :-1]}), f"array {array!r}", "shape")


def test_order_that_is_not_an_integer(saved, tmp_path):
    _refused(_rewrite(saved["flow"], tmp_path / "x.npz", meta={"order": 1e9}), "order")
    _refused(_rewrite(saved["flow"], tmp_path / "y.npz", meta={"order": 10**9}), "coefficients", "shape")


@pytest.mark.parametrize("dps", [1e7, 10**7, 15, "30", True])
def test_bad_dps(saved, tmp_path, dps):
    _refused(_rewrite(saved["flow_mp"], tmp_path / "x.npz", meta={"dps": dps}), "dps")


def test_non_finite_states(saved, tmp_path):
    states = _arrays(saved["gd"])["states"].copy()
    states[1, 0, 0] = np.nan
    _refused(_rewrite(saved["gd"], tmp_path / "x.npz", states=states), "states", "non-finite")


def test_event_indices_out_of_range(saved, tmp_path):
    neuron = _arrays(saved["flow"])["event_neuron"] + 5
    _refused(_rewrite(saved["flow"], tmp_path / "x.npz", event_neuron=neuron), "event_neuron")


def test_mp_text_that_is_not_a_number(saved, tmp_path):
    loss = _arrays(saved["flow_mp"])["loss"].copy()
    loss[0] = "twelve"
    message = _refused(_rewrite(saved["flow_mp"], tmp_path / "x.npz", loss=loss), "loss")
    assert "twelve" not in message


# ----- fuzzing ---------------------------------------------------------------------------------------------------
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                  max_size=3), max_leaves=8)
_DTYPES = st.sampled_from([np.float64, np.int64, np.int16, np.bool_, "U4", np.float32])


@st.composite
def _random_array(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
    dtype = draw(_DTYPES)
    values = draw(st.lists(st.integers(-3, 3) | st.floats(allow_nan=True), min_size=int(np.prod(shape)),
                           max_size=int(np.prod(shape))))
    return np.array(values, dtype=np.float64).reshape(shape).astype(dtype)


def _check_valid(result) -> None:
    """A loaded result is usable: right shapes, finite states, indices in range, its text views work."""
    if isinstance(result, fl.FlowResult):
        n, m = len(result.t), result.states.shape[1]
        assert result.states.shape == (n, m, result.problem.d + 2) and m >= 1
        assert len(result.loss) == n and len(result.energy) == n - 1
        assert np.all(np.isfinite(result.float64("states")))
        if result.coefficients is not None:
            assert result.coefficients.shape == (n - 1, result.order + 1, m, result.problem.d + 2)
        assert all(0 <= e.neuron < m and 0 <= e.sample < result.problem.n for e in result.events)
        result.event_table()
        result.summary()
    elif isinstance(result, fl.DescentResult):
        assert result.states.shape[0] == len(result.iterations) == len(result.loss)
        assert result.iterations[0] == 0 and result.iterations[-1] == result.steps
        assert np.all(np.isfinite(result.states_float()))
        result.flip_table()
        result.summary()
        result.final
    else:
        assert isinstance(result, fl.EnsembleResult)
        count = len(result)
        assert result.inits.shape == result.final.shape and len(result.inits) == count >= 1
        assert np.all(np.isfinite(result.inits))
        assert np.all((0 <= result.problem_index) & (result.problem_index < len(result.problems)))
        result.counts()
        result.summary()


def _load_or_refuse(path) -> None:
    try:
        result = fl.load(path)
    except ValueError as exc:
        assert str(path) in str(exc), str(exc)
        assert "\n" not in str(exc)
        return
    _check_valid(result)


_KINDS = st.sampled_from(["flow", "flow_mp", "gd", "gd_mp", "ensemble"])
_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(kind=_KINDS, data=st.data())
def test_fuzz_damaged_bytes(saved, tmp_path, kind, data):
    raw = bytearray(saved[kind].read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="length")]
    else:
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "damaged.npz"
    path.write_bytes(bytes(raw))
    _load_or_refuse(path)


@_FUZZ
@given(kind=_KINDS, data=st.data())
def test_fuzz_replaced_or_deleted_arrays(saved, tmp_path, kind, data):
    names = sorted(name for name in _arrays(saved[kind]) if name != "meta")
    changes = {}
    for name in data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True), label="arrays"):
        changes[name] = data.draw(st.none() | _random_array(), label=name)
    _load_or_refuse(_rewrite(saved[kind], tmp_path / "arrays.npz", **changes))


@_FUZZ
@given(kind=_KINDS, data=st.data())
def test_fuzz_metadata(saved, tmp_path, kind, data):
    meta = json.loads(str(_arrays(saved[kind])["meta"]))
    if data.draw(st.integers(0, 9), label="whole") == 0:
        meta = data.draw(_JSON, label="meta")
    else:
        for key in data.draw(st.lists(st.sampled_from(sorted(meta)), min_size=1, max_size=3, unique=True)):
            target = meta
            if isinstance(meta[key], dict) and meta[key] and data.draw(st.booleans(), label="nested"):
                target, key = meta[key], data.draw(st.sampled_from(sorted(meta[key])), label="inner")
            if data.draw(st.integers(0, 4), label="delete") == 0:
                del target[key]
            else:
                target[key] = data.draw(_JSON, label=key)
    _load_or_refuse(_rewrite(saved[kind], tmp_path / "meta.npz", meta_text=json.dumps(meta)))



@pytest.mark.parametrize("kinds", [[[]], [{"a": 1}], ["cross", 3]])
def test_event_kinds_that_are_not_names(saved, tmp_path, kinds):
    """Found by the metadata fuzz: a list holding a list made the check itself raise TypeError."""
    _refused(_rewrite(saved["flow"], tmp_path / "k.npz", meta={"event_kinds": kinds}), "event_kinds")
