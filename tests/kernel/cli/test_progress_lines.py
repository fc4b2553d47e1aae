"""A headless job's lines start on a line of their own, not glued to the progress bar."""

from hotswitch.kernel.cli import progress


def test_a_job_line_after_the_bar_starts_a_new_line(capsys):
    lines = progress.JobLines()
    progress.write("\r[###...] step 3/10  loss 5.1")
    lines.write("[hotswitch] job 'train' succeeded after 9.4 s\n")
    lines.write("[stdout:0] printed by rank 0\n")
    progress.write("\r[####..] step 4/10  loss 5.0")
    progress.write("\n")
    lines.write("[hotswitch] job 'train' stopped after 12.0 s\n")
    assert capsys.readouterr().err == (
        "\r[###...] step 3/10  loss 5.1\n[hotswitch] job 'train' succeeded after 9.4 s\n"
        "[stdout:0] printed by rank 0\n\r[####..] step 4/10  loss 5.0\n[hotswitch] job 'train' stopped after 12.0 s\n"
    )
