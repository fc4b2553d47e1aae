"""``hotswitch plan-switch``: a switch between device groups is planned on the devices both reach."""

import json

from hotswitch.kernel.cli.main import main


def test_device_groups_are_planned_on_as_many_devices_as_they_reach(capsys):
    assert main(["plan-switch", "tp2@0-1", "dp2@2-3", "--model", "tiny"]) == 0
    assert capsys.readouterr().out.startswith("tiny on 4 x A800-80G (1 node(s)): tp2@0-1 -> dp2@2-3")
    assert main(["plan-switch", "tp2@0-1", "dp2@2-3", "--model", "tiny", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)
    # every parameter leaves ranks 0-1 for ranks 2-3: nothing is already in place
    assert plans["balanced"]["bytes_moved"] == plans["naive"]["bytes_moved"] > 0
