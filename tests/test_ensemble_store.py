"""The folder an ensemble streams to (``out=``): fingerprints and checksums, damaged or foreign chunks, a damaged
``meta.json``, other versions, the lock and a real race of two processes, a fuzz of corruptions; the checks of
ensemble inputs (no silent coercion); members with a non-finite state count as failed."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowlib as fl
from flowlib import ensemble_store, examples
from flowlib.ensemble_result import MEMBER_ARRAYS

N, SIZE, STEPS = 10, 5, 200


def _inits(seed):
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    return prob, fl.random_inits(prob, m=2, count=N, scheme="he", a=[1.0, -1.0], bias=0.0, seed=seed)


def _run(out=None, seed=6, **kwargs):
    prob, inits = _inits(seed)
    return fl.ensemble(prob, inits, "gd", lr=0.05, steps=STEPS, chunk_size=SIZE, out=out, **kwargs)


_REFERENCE = {}


def _reference(seed=6):
    if seed not in _REFERENCE:
        _REFERENCE[seed] = _run(seed=seed)
    return _REFERENCE[seed]


def _same_members(result, reference, rows=slice(None)):
    for name in MEMBER_ARRAYS:
        assert np.array_equal(getattr(result, name)[rows], getattr(reference, name)[rows], equal_nan=True), name
    return True


def _chunk(out, index):
    return Path(out) / f"chunk_{index:06d}.npz"


def _rewrite_chunk(path, **changes):
    """Rewrite a chunk file with some arrays changed, its checksum recomputed (a valid-looking file)."""
    with np.load(path) as data:
        stored = {name: data[name] for name in data.files}
    stored.update(changes)
    stored["checksum"] = np.array(ensemble_store._array_sha256(stored))
    np.savez(path, **stored)


# ----- chunks ---------------------------------------------------------------------------------------------------
def test_chunks_carry_the_fingerprint_and_a_checksum(tmp_path):
    ens = _run(tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["fingerprint"] == ens.meta["fingerprint"] and meta["chunk_size"] == SIZE
    assert set(meta["engine"]) == {"flowlib", "numba", "numpy"}
    with np.load(_chunk(tmp_path / "run", 1)) as data:
        assert str(data["fingerprint"]) == meta["fingerprint"] and int(data["index"]) == 1
        assert str(data["checksum"]) == ensemble_store._array_sha256({k: data[k] for k in MEMBER_ARRAYS})


def test_chunk_with_too_few_members_is_recomputed(tmp_path):
    """A valid chunk file that holds 2 of its 5 members is not a finished chunk."""
    out = tmp_path / "run"
    _run(out)
    with np.load(_chunk(out, 1)) as data:
        short = {name: data[name][:2] for name in MEMBER_ARRAYS}
    _rewrite_chunk(_chunk(out, 1), **short)
    with pytest.warns(UserWarning, match="chunk_000001.npz"):
        loaded = fl.load(out)
    assert not loaded.complete and loaded.counts()["pending"] == 5 and _same_members(loaded, _reference(), slice(5))
    with pytest.warns(UserWarning, match="chunk_000001.npz"):
        again = _run(out)
    assert again.complete and _same_members(again, _reference())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _same_members(fl.load(out), _reference())


@pytest.mark.parametrize("damage", ["truncate", "zero", "flip", "pending"])
def test_damaged_chunk_is_recomputed_with_a_warning(tmp_path, damage):
    out = tmp_path / "run"
    _run(out)
    path = _chunk(out, 0)
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "zero":
        path.write_bytes(b"")
    elif damage == "flip":
        with np.load(path) as data:
            loss = data["loss"].copy()
        loss[3] = np.nextafter(loss[3], np.inf)  # a changed number under a stale checksum
        with np.load(path) as data:
            stored = {name: data[name] for name in data.files}
        np.savez(path, **dict(stored, loss=loss))
    else:
        _rewrite_chunk(path, status_code=np.full(SIZE, -1, np.int16))
    with pytest.warns(UserWarning, match="chunk_000000.npz"):
        loaded = fl.load(out)
    assert not loaded.complete and list(loaded.status[:5]) == ["pending"] * 5
    assert _same_members(loaded, _reference(), slice(5, None))
    with pytest.warns(UserWarning, match="chunk_000000.npz"):
        again = _run(out)
    assert again.complete and _same_members(again, _reference())


def test_foreign_chunk_is_not_adopted(tmp_path):
    """A chunk of another ensemble (same layout, other initialisations) copied into the folder."""
    _run(tmp_path / "a")
    _run(tmp_path / "b", seed=7)
    shutil.copy(_chunk(tmp_path / "b", 1), _chunk(tmp_path / "a", 1))
    with pytest.warns(UserWarning, match="chunk_000001.npz.*another ensemble"):
        again = _run(tmp_path / "a")
    assert _same_members(again, _reference())


# ----- the folder -----------------------------------------------------------------------------------------------
def test_folder_without_meta_json_is_refused(tmp_path):
    out = tmp_path / "run"
    _run(out)
    (out / "meta.json").unlink()
    for seed in (7, 6):  # another ensemble must not adopt the chunks; nor is the same one resumed unverified
        with pytest.raises(ValueError, match=r"out=.*run.*no meta\.json"):
            _run(out, seed=seed)
    with pytest.raises(ValueError, match="meta.json"):
        fl.load(out)


def test_folder_of_another_ensemble_is_refused(tmp_path):
    out = tmp_path / "run"
    _run(out)
    with pytest.raises(ValueError, match=r"out=.*another ensemble"):
        _run(out, seed=7)
    with pytest.raises(ValueError, match=r"out=.*another ensemble"):  # the chunk layout is part of it
        prob, inits = _inits(6)
        fl.ensemble(prob, inits, "gd", lr=0.05, steps=STEPS, chunk_size=2, out=out)


def test_folder_of_other_versions_is_refused(tmp_path, monkeypatch):
    import numba

    real = ensemble_store.versions
    monkeypatch.setattr(ensemble_store, "versions", lambda: dict(real(), numba="0.1.0", flowlib="0.0.1"))
    out = tmp_path / "run"
    _run(out, callback=lambda progress: True)
    monkeypatch.setattr(ensemble_store, "versions", real)
    with pytest.raises(ValueError, match=r"out=.*run.*0\.1\.0.*" + numba.__version__.replace(".", r"\.")):
        _run(out)
    assert not fl.load(out).complete  # reading it is fine


@pytest.mark.parametrize("edit, field", [
    (lambda meta: dict(meta, chunk_size=0), "chunk_size"),
    (lambda meta: dict(meta, chunk_size=7), "chunk_size"),
    (lambda meta: dict(meta, chunk_size="5"), "chunk_size"),
    (lambda meta: [meta], "list"),
    (lambda meta: {k: v for k, v in meta.items() if k != "n_members"}, "n_members"),
    (lambda meta: {k: v for k, v in meta.items() if k != "fingerprint"}, "fingerprint"),
    (lambda meta: dict(meta, problem_index=[0, 1]), "problem_index"),
    (lambda meta: dict(meta, options=dict(meta["options"], lr=0.04)), "options"),
])
def test_wrong_meta_fields_are_named(tmp_path, edit, field):
    out = tmp_path / "run"
    _run(out)
    path = out / "meta.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    with pytest.raises(ValueError, match=rf"meta\.json.*{field}"):
        fl.load(out)
    with pytest.raises(ValueError, match=rf"meta\.json.*{field}"):
        _run(out)


def test_damaged_inits_npy(tmp_path):
    out = tmp_path / "run"
    _run(out, callback=lambda progress: True)
    (out / "inits.npy").write_bytes((out / "inits.npy").read_bytes()[:-8])
    with pytest.raises(ValueError, match="inits.npy"):
        fl.load(out)
    with pytest.warns(UserWarning, match="inits.npy"):  # the caller's inits match meta.json: rewritten
        again = _run(out)
    assert _same_members(again, _reference()) and _same_members(fl.load(out), _reference())


def test_a_second_writer_is_refused_and_a_dead_writers_lock_does_not_block(tmp_path):
    out = tmp_path / "run"
    (out / "other").mkdir(parents=True)
    holder = ensemble_store._FolderLock(out / "other", "held")  # what a running ensemble holds
    try:
        with pytest.raises(ValueError, match=r"out=.*other.*being written by another ensemble run"):
            _run(out / "other")
    finally:
        holder.release()
    assert _run(out / "other").complete
    (out / "dead").mkdir()
    (out / "dead" / ".lock").write_text("999999999\n")  # left by a process that died: no flock is held on it
    assert _run(out / "dead").complete


def _race_worker(out, seed, start, results):
    start.wait()  # both processes are ready: they start at once
    try:
        ens = _run(out, seed=seed)
        results.put((seed, "ok", ens.meta["fingerprint"]))
    except ValueError as exc:
        results.put((seed, "ValueError", str(exc)))
    except BaseException as exc:  # pragma: no cover - reported to the parent as a failure
        results.put((seed, type(exc).__name__, str(exc)))


@pytest.mark.slow
def test_two_processes_starting_different_ensembles_on_one_new_folder(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = tmp_path / "race"
    start, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(out, seed, start, results)) for seed in (6, 7)]
    for proc in procs:
        proc.start()
    reports = sorted(results.get(timeout=300) for _ in procs)
    for proc in procs:
        proc.join(60)
    kinds = sorted(kind for _, kind, _ in reports)
    assert kinds == ["ValueError", "ok"], reports
    (winner,) = [seed for seed, kind, _ in reports if kind == "ok"]
    (message,) = [text for _, kind, text in reports if kind == "ValueError"]
    assert "out=" in message and "race" in message, message
    loaded = fl.load(out)
    assert loaded.complete and np.array_equal(loaded.inits, _inits(winner)[1])
    assert _same_members(loaded, _reference(winner))


# ----- fuzz -----------------------------------------------------------------------------------------------------
_FILES = ["meta.json", "inits.npy", "chunk_000000.npz", "chunk_000001.npz"]


def _corrupt(folder: Path, data) -> None:
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        name = data.draw(st.sampled_from(_FILES), label="file")
        path = folder / name
        how = data.draw(st.sampled_from(["truncate", "zero", "flip", "delete", "foreign"]), label="how")
        if not path.exists():
            continue
        raw = bytearray(path.read_bytes())
        if how == "delete":
            path.unlink()
        elif how == "zero":
            path.write_bytes(b"")
        elif how == "truncate":
            path.write_bytes(raw[: data.draw(st.integers(0, max(0, len(raw) - 1)), label="keep")])
        elif how == "flip" and raw:
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
            raw[at] ^= data.draw(st.integers(1, 255), label="mask")
            path.write_bytes(bytes(raw))
        elif how == "foreign":
            shutil.copy(_PRISTINE / "b" / name, path)


_PRISTINE = Path(tempfile.mkdtemp(prefix="flowlib-store-fuzz-"))


def _pristine():
    if not (_PRISTINE / "a").exists():
        _run(_PRISTINE / "a")
        _run(_PRISTINE / "b", seed=7)


def _is_ensemble(result, seed) -> bool:
    """Every computed member is the reference member of ``seed``; the inits are ``seed``'s."""
    reference = _reference(seed)
    done = result.done
    return np.array_equal(result.inits, reference.inits) and all(
        np.array_equal(getattr(result, name)[done], getattr(reference, name)[done], equal_nan=True)
        for name in MEMBER_ARRAYS)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_corrupted_folders(data):
    """Random damage never raises anything but ValueError (or warns), and never mixes two ensembles."""
    _pristine()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "a"
        shutil.copytree(_PRISTINE / "a", folder)
        _corrupt(folder, data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                loaded = fl.load(folder)
            except ValueError:
                pass
            else:  # the meta.json and inits.npy of the other ensemble may have been copied in
                assert _is_ensemble(loaded, 6) or _is_ensemble(loaded, 7)
            seed = data.draw(st.sampled_from([6, 7]), label="resume with seed")
            try:
                resumed = _run(folder, seed=seed)
            except ValueError as exc:
                assert "meta.json" in str(exc) or "out=" in str(exc)
            else:
                assert resumed.complete and _is_ensemble(resumed, seed)
                assert _is_ensemble(fl.load(folder), seed)


# ----- inputs ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [
    lambda x: x.astype(complex) + 1e-3j,
    lambda x: x.astype(complex),  # zero imaginary parts are still not real data
    lambda x: x.astype(str),
    lambda x: x != 0,
    lambda x: x.astype(object),
    lambda x: np.full(x.shape, 2**53 + 1, np.int64),
    lambda x: np.full(x.shape, 2**64 - 1, np.uint64),
    lambda x: [list(x[0]), list(x[1][:1])],  # ragged
])
def test_inits_are_not_coerced_silently(bad):
    prob, inits = _inits(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the ValueError
        with pytest.raises(ValueError, match="inits"):
            fl.ensemble(prob, bad(inits[:2]), "gd", lr=0.05, steps=10)


def test_integer_inits_that_float64_holds_exactly_are_accepted():
    prob, _ = _inits(6)
    ints = np.array([[[1, 0, 1], [-2, 0, -1]], [[2**60, 0, 1], [3, 0, -1]]], np.int64)
    ens = fl.ensemble(prob, ints, "gd", lr=0.05, steps=0 + 1)
    assert ens.inits.dtype == np.float64 and ens.inits[1, 0, 0] == 2.0**60


@pytest.mark.parametrize("kwargs, name", [
    (dict(a=[np.nan, 1.0]), "a"),
    (dict(a=[1.0, np.inf]), "a"),
    (dict(a=[1 + 1j, 1.0]), "a"),
    (dict(a=["1", "2"]), "a"),
    (dict(bias=np.inf), "bias"),
    (dict(bias=np.nan), "bias"),
    (dict(bias="x"), "bias"),
    (dict(bias=True), "bias"),
    (dict(seed="abc"), "seed"),
    (dict(seed=-1), "seed"),
    (dict(seed=1.5), "seed"),
    (dict(seed=True), "seed"),
])
def test_random_inits_arguments_are_named(kwargs, name):
    prob, _ = _inits(6)
    with pytest.raises(ValueError, match=name):
        fl.random_inits(prob, m=2, count=3, **kwargs)


def test_random_inits_accepts_generators_and_numpy_integers():
    prob, _ = _inits(6)
    a = fl.random_inits(prob, m=2, count=3, seed=np.int64(5), bias=np.float32(0.0))
    b = fl.random_inits(prob, m=2, count=3, seed=np.random.default_rng(5))
    assert np.array_equal(a, b) and np.all(np.isfinite(a))


# ----- members whose state is not finite ------------------------------------------------------------------------
def _overflowing_member():
    """Exp loss, one sample with y f = -700 at the start: the loss is e^700 and the state blows up."""
    prob = fl.Problem(np.array([[1.0]]), np.array([1.0]), loss="exp", bias=False, train_outer=False)
    good = [[0.5, 0.0, 1.0]]
    bad = [[700.0, 0.0, -1.0]]  # f = a relu(w x) = -700
    return prob, np.array([good, bad])


def test_flow_member_with_a_nonfinite_state_is_failed():
    prob, inits = _overflowing_member()
    ens = fl.ensemble(prob, inits, "flow", t_end=10.0)
    assert list(ens.status) == ["success", "failed"]
    assert ens.counts() == {"failed": 1, "success": 1}
    assert "failed 1, success 1" in ens.summary()
    assert np.isfinite(ens.loss[0]) and np.all(np.isfinite(ens.final[0]))


def test_a_nonfinite_member_is_failed_whatever_code_the_kernel_gives():
    """The ensemble's own guard: a kernel code of success (or reached, deadline, a budget) with a non-finite loss
    or state becomes failed; other codes and finite members are left alone."""
    import sys

    from flowlib.ensemble_result import empty_members
    from flowlib.kernels import status

    finished = sys.modules["flowlib.ensemble"]._finished
    part = empty_members(5, (1, 3))
    part["final"][:] = 1.0
    part["loss"][:] = [0.5, np.nan, np.inf, 0.5, np.nan]
    part["final"][3, 0, 0] = np.nan
    part["status_code"][:] = [status.SUCCESS, status.SUCCESS, status.REACHED, status.DEADLINE, status.NO_PROGRESS]
    codes = finished(part)["status_code"]
    assert list(codes) == [status.SUCCESS, status.NONFINITE, status.NONFINITE, status.NONFINITE, status.NO_PROGRESS]
