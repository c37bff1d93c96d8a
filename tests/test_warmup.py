"""``flowlib warmup``: the announced compilation step of the README's first command."""

import flowlib as fl
from flowlib import cli


def test_warmup_announces_every_stage_and_reports_the_total(capsys):
    assert cli.main(["warmup"]) == 0
    lines = capsys.readouterr().out.splitlines()
    stages = [line for line in lines if line.startswith("[")]
    assert [line[:5] for line in stages] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all(line.endswith(" s") for line in stages)
    assert lines[-1].startswith("kernels ready in ")


def test_warmup_is_silent_by_default(capsys):
    assert fl.warmup() >= 0.0
    assert capsys.readouterr().out == ""


def test_warmup_in_one_process_or_in_workers_reports_every_stage(capsys):
    """``--jobs 1`` compiles here, stage by stage; the default splits the stages over two worker processes and then
    loads every kernel here, from the cache they wrote."""
    assert cli.main(["warmup", "--jobs", "1"]) == 0
    here = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert [line.split(" compiling or loading the kernels of ")[0] for line in here] == ["[1/4]", "[2/4]", "[3/4]",
                                                                                         "[4/4]"]
    assert fl.warmup(jobs=2, announce=True) >= 0.0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("compiling the kernels in 2 worker processes")
    assert [line[:5] for line in lines if line.startswith("[")] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert lines[-1].startswith("loading the compiled kernels here ... ") and lines[-1].endswith(" s")


def test_warmup_refuses_a_bad_jobs():
    import pytest

    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="jobs must be None or an integer >= 1"):
            fl.warmup(jobs=bad)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["warmup", "--jobs", "0"])
    assert exit_.value.code == 2


def test_warmup_compiles_here_where_workers_cannot_start(monkeypatch, capsys):
    import sys

    module = sys.modules["flowlib.warmup"]  # the module (fl.warmup is its function)

    def refuse(announce):
        raise OSError("no fork here")

    monkeypatch.setattr(module, "_compile_in_workers", refuse)
    assert fl.warmup(jobs=2, announce=True) >= 0.0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "worker processes failed (OSError: no fork here); compiling here instead"
    assert [line[:5] for line in lines[1:]] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
