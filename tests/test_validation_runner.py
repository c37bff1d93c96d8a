"""The validation framework itself: registration, statuses, the report files and the exit status."""

import json

import pytest

from flowlib.validation import core, runner


@pytest.fixture
def dummy_claims():
    """Four claims that cover every status, removed again afterwards."""
    ids = ["zz-pass", "zz-fail", "zz-error", "zz-skip"]

    @core.claim("zz-pass", "Lemma 0", "1 + 1 = 2")
    def passing(ctx):
        fig, ax = ctx.figure()
        ax.plot([0, 1], [0, 1])
        return core.Outcome(measured=2.0, bound=2.0, passed=True, detail="counted", plots=[ctx.save(fig, "zz-pass")],
                            data={"value": 2.0}, certified="proven: 2 in [2, 2]")

    @core.claim("zz-fail", "Theorem 9", "a bound that fails", expect="paper-wrong")
    def failing(ctx):
        return core.Outcome(measured=0.5, bound=">= 1", passed=False)

    @core.claim("zz-error", "Eq. 3", "a claim that crashes")
    def crashing(ctx):
        raise RuntimeError("boom")

    @core.claim("zz-skip", "§5", "needs a module nobody has", needs=("no_such_module_for_flowlib_tests",))
    def skipped(ctx):  # pragma: no cover - never runs
        raise AssertionError

    yield ids
    for i in ids:
        core.CLAIMS.pop(i, None)


def test_statuses_and_report(dummy_claims, tmp_path):
    records = runner.run(dummy_claims, quick=True, out=tmp_path, jobs=1, progress=False)
    assert [r.status for r in records] == ["pass", "fail", "error", "skipped"]
    assert "boom" in records[2].detail and "no_such_module" in records[3].detail
    assert records[0].plots == ["zz-pass.png"] and (tmp_path / "zz-pass.png").stat().st_size > 0
    md, js = runner.write_report(records, tmp_path, quick=True, wall_s=1.0)
    text = md.read_text()
    assert "**1 passed, 1 failed, 1 errors, 1 skipped.**" in text
    assert "| `zz-fail` | Theorem 9 | a bound that fails | 0.5 | >= 1 | fail (paper-wrong) | - |" in text
    assert "| `zz-pass` | Lemma 0 | 1 + 1 = 2 | 2 | 2 | pass | proven: 2 in [2, 2] |" in text
    assert "![zz-pass](zz-pass.png)" in text
    data = json.loads(js.read_text())
    assert data["counts"] == {"pass": 1, "fail": 1, "error": 1, "skipped": 1}
    assert data["claims"][0]["data"] == {"value": 2.0} and data["versions"]["flowlib"]
    assert data["claims"][0]["certified"] == "proven: 2 in [2, 2]" and data["claims"][1]["certified"] == ""
    assert data["claims"][0]["versions"]["numba"] and data["claims"][0]["runtime_s"] >= 0


def test_exit_status_and_arguments(dummy_claims, tmp_path, capsys):
    assert runner.main(["--only", "zz-pass", "zz-skip", "--out", str(tmp_path), "--jobs", "1"]) == 0
    assert runner.main(["--only", "zz-pass", "zz-fail", "--out", str(tmp_path), "--jobs", "1"]) == 1
    with pytest.raises(SystemExit) as exc:
        runner.main(["--only", "no-such-claim", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "unknown claim" in capsys.readouterr().err


def test_registration_rejects_bad_ids_and_expectations():
    with pytest.raises(ValueError, match="id"):
        core.claim("nodash", "x", "y")
    with pytest.raises(ValueError, match="expect"):
        core.claim("zz-x", "x", "y", expect="maybe")


def test_every_registered_claim_is_well_formed():
    claims = runner.load_claims()
    assert "000-margin-rate" in claims
    for c in claims.values():
        assert c.paper in {"000", "001", "002", "003", "004"}, c.id
        assert c.reference and c.statement and c.expect in core.EXPECTATIONS
