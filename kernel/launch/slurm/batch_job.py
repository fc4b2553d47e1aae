"""What ``--launcher slurm`` submits: the batch script (the job's shape, and the launch options
that are sbatch's own as ``#SBATCH`` lines) and sbatch's command line, with ``--slurm-args``
appended once checked. Pure: nothing here talks to Slurm.

The launcher sets some of sbatch's options itself: the job's shape, which the kernel's own
options say, and what it reads the job back by. ``--slurm-args`` may not set those (sbatch's
command line would override the script's), so each is refused, naming what to give instead.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.options import OPTIONS

# The launch options that are sbatch options of the same name (dashes for underscores).
SBATCH_OPTIONS = ("partition", "time", "gpus_per_node", "account", "qos")
# sbatch's options that the launcher sets from a launch option: that option, to give instead.
FROM_OPTION = {
    "nodes": "nodes",
    "ntasks": "nproc",
    "ntasks-per-node": "nproc",  # one task per node, torchrun starting its ranks
    "cpus-per-task": "nproc",  # a CPU per rank
    **{key.replace("_", "-"): key for key in SBATCH_OPTIONS},
}
# sbatch's options that are the launcher's alone, and why.
LAUNCHERS_OWN = {
    "job-name": "it names the job after its run folder (hotswitch-FOLDER)",
    "output": "it reads the job's output from the run folder",
    "parsable": "it reads the job id from sbatch's answer",
    "wrap": "it submits its own batch script",
}
# their one-letter forms
SHORT = {
    "N": "nodes",
    "n": "ntasks",
    "c": "cpus-per-task",
    "p": "partition",
    "t": "time",
    "A": "account",
    "q": "qos",
    "J": "job-name",
    "o": "output",
}
# sbatch options of their own whose names begin one above's (else taken as its abbreviation)
WHOLE = {"gpus"}


def batch_script(folder: Path, spec: LaunchSpec, options: dict) -> str:
    """The sbatch script: one torchrun per node, from the job's shared folder; ``options``: the
    launcher's, those of ``SBATCH_OPTIONS`` given becoming ``#SBATCH`` lines."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=hotswitch-{spec.job_dir.name}",
        f"#SBATCH --nodes={spec.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={spec.nproc}",
        f"#SBATCH --output={folder}/slurm-%j.out",
        *(f"#SBATCH --{key.replace('_', '-')}={options[key]}" for key in SBATCH_OPTIONS if options.get(key)),
        "set -euo pipefail",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        # the head node's task holds a port there for the rendezvous (``slurm.node``)
        'export HOTSWITCH_RDZV_HOST="$head"',
        f"srun --kill-on-bad-exit=1 {shlex.quote(sys.executable)} -m hotswitch.kernel.launch.slurm.node "
        f"{shlex.quote(str(folder))}",
    ]
    return "\n".join(lines) + "\n"


def sbatch_argv(script: Path, extra: list[str]) -> list[str]:
    """sbatch's command line for ``script``, ``extra`` (``slurm_args``) before it: options after
    the script would be the script's arguments."""
    return ["sbatch", "--parsable", *extra, str(script)]


def launcher_set(token: str) -> str | None:
    """The sbatch option that the launcher sets which ``token`` gives (``--nodes=2``, ``-N2``,
    ``--part gpu``: sbatch takes an option's abbreviation too), or None."""
    if token.startswith("--"):
        name = token[2:].partition("=")[0]
        if not name or name in WHOLE:
            return None
        known = (*FROM_OPTION, *LAUNCHERS_OWN)
        return name if name in known else next((option for option in known if option.startswith(name)), None)
    if token.startswith("-") and len(token) > 1:
        return SHORT.get(token[1])
    return None


def quoted_whole(text: str) -> bool:
    """Whether ``text`` is one quoted string (``"--exclusive --mem=0"``)."""
    text = text.strip()
    return len(text) > 1 and text[0] == text[-1] and text[0] in "'\""


def extra_sbatch_args(text: str | None) -> list[str]:
    """``--slurm-args`` as sbatch's arguments, split as a shell would (inside the quotes, where a
    magic's line kept them: ``%%train --slurm-args "--exclusive --mem=0"``); ValueError naming
    what to give instead for any the launcher sets itself."""
    try:
        tokens = shlex.split(text or "")
        if len(tokens) == 1 and quoted_whole(text or ""):  # a magic's: IPython keeps an argument's quotes
            tokens = shlex.split(tokens[0])
    except ValueError as error:
        raise ValueError(f"--slurm-args {text!r} cannot be split as a shell would: {error}") from None
    for token in tokens:
        option = launcher_set(token)
        if option in FROM_OPTION:
            flags = "/".join(OPTIONS[FROM_OPTION[option]].flags)
            raise ValueError(
                f"--slurm-args: {token} would set sbatch's --{option}, which the launcher sets from {flags}; "
                f"give {flags} instead"
            )
        if option:
            raise ValueError(
                f"--slurm-args: {token} would set sbatch's --{option}, which is the launcher's alone "
                f"({LAUNCHERS_OWN[option]}); leave it out"
            )
    return tokens
