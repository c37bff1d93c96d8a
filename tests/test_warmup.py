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
