"""Launch options, each defined once: where ranks start and how the kernel talks to them. The
flags of ``%%train``, ``%train_pool start`` and ``hotswitch train`` are generated from these
definitions (their defaults and help too), as the training flags are generated from the run
settings; ``--device`` is the run setting's own (``parallelism.device``). Each launcher owns
its options (``owner``): giving one to another launcher is refused (``named.make_launcher``).

A command takes the options it needs by name (``add_launch_options``); the few flags that are
a command's own (``%%train``'s ``--wait``, ``hotswitch train``'s ``--json``) stay with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hotswitch.kernel.channel.signing import DEFAULT_MAX_MESSAGE_BYTES
from hotswitch.kernel.launch.named import KUBEFLOW_BACKENDS, LAUNCHERS, OWN_OPTIONS
from hotswitch.kernel.worker.collective_wait import DEFAULT_WAIT_S

CHANNEL_HOST = "127.0.0.1"
DEFAULT_NPROC = 2
DEFAULT_IDLE_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class LaunchOption:
    """One option: its flags, its one default and its help (``owner``: the launcher it is for).

    A launcher's option parses as None unless given, so that one given to another launcher is
    told from one left out (``named.foreign_options``); its ``default`` is then the one its
    launcher applies, and the help shows it."""

    dest: str
    flags: tuple[str, ...]
    help: str
    default: Any = None
    type: Callable | None = None
    choices: tuple | None = None
    action: str | None = None
    metavar: str | None = None
    owner: str | None = None
    setting: str | None = None  # the run setting it is, where it is one (its definition is there)

    def text(self) -> str:
        """The help as every command shows it: the launcher it is for, and its default."""
        prefix = f"with --launcher {self.owner}: " if self.owner else ""
        shown = "" if self.default in (None, False) or "default" in self.help else f" (default {self.default})"
        return (prefix + self.help + shown).replace("%", "%%")

    def keywords(self) -> dict:
        """``add_argument``'s keywords (after the flags)."""
        extra = {"type": self.type, "choices": self.choices, "action": self.action, "metavar": self.metavar}
        default = None if self.owner else self.default
        return {"dest": self.dest, "default": default, "help": self.text()} | {
            k: v for k, v in extra.items() if v is not None
        }


def _device() -> LaunchOption:
    """``--device``: the run setting's definition, as a launch option (the ranks' device kind)."""
    from hotswitch.backend.train.config.run_config import SETTINGS

    device = SETTINGS["device"]
    return LaunchOption("device", ("--device",), device.help, None, choices=device.choices, setting=device.key)


def _owned(dest: str) -> str | None:
    return next((owner for owner, keys in OWN_OPTIONS.items() if dest in keys), None)


def _common() -> list[LaunchOption]:
    """The options of every launch: ranks, rendezvous, device, launcher, channel, timeouts."""
    return [
        LaunchOption("nproc", ("-n", "--nproc"), "ranks per node (with --pool: the pool's)", DEFAULT_NPROC, int),
        LaunchOption("nodes", ("--nodes",), "nodes in the job (more than 1: a launcher that starts each)", 1, int),
        LaunchOption("node_rank", ("--node-rank",), "this node's index, 0..nodes-1 (node 0 hosts rendezvous)", 0, int),
        LaunchOption("rdzv_endpoint", ("--rdzv-endpoint",), "HOST:PORT of the c10d rendezvous, the same on every node"),
        LaunchOption("rdzv_id", ("--rdzv-id",), "rendezvous id, the same on every node of one job"),
        _device(),
        # no choices: the launcher by name says what is available (and why one is not)
        LaunchOption("launcher", ("--launcher",), f"how ranks start: {', '.join(LAUNCHERS)}", "local"),
        LaunchOption(
            "detach",
            ("--detach",),
            "outlive this kernel; attach again by name from another",
            False,
            action="store_true",
        ),
        LaunchOption(
            "env", ("--env",), "environment variable for every rank; repeatable", action="append", metavar="K=V"
        ),
        LaunchOption("timeout", ("--timeout",), "seconds before the job is stopped and marked 'timed out'", type=float),
        LaunchOption("channel_host", ("--channel-host",), "address the kernel listens on for the ranks", CHANNEL_HOST),
        LaunchOption(
            "collective_wait",
            ("--collective-wait",),
            "seconds a rank may wait in one collective before the cell names it and the ranks not arrived (0: never)",
            DEFAULT_WAIT_S,
            float,
        ),
        LaunchOption(
            "max_message_bytes",
            ("--max-message-bytes",),
            "largest channel message accepted; bigger ones are dropped and counted",
            DEFAULT_MAX_MESSAGE_BYTES,
            int,
        ),
        LaunchOption(
            "idle_timeout",
            ("--idle-timeout",),
            "seconds without a cell before a pool stops (0: never)",
            DEFAULT_IDLE_TIMEOUT_S,
            float,
        ),
    ]


def _launchers_own() -> list[LaunchOption]:
    """Each launcher's own options (``named.OWN_OPTIONS`` says whose): Ray's, Slurm's, Kubeflow's."""
    return [
        LaunchOption("ray_address", ("--ray-address",), "the head's HOST:PORT (default $RAY_ADDRESS)"),
        LaunchOption("partition", ("--partition",), "the partition (default: the cluster's)"),
        LaunchOption("time", ("--time",), "the time limit, e.g. 2:00:00"),
        LaunchOption("gpus_per_node", ("--gpus-per-node",), "GPUs per node", type=int),
        LaunchOption("account", ("--account",), "the account the job is charged to (default: your default account)"),
        LaunchOption("qos", ("--qos",), "the quality of service (default: the account's)"),
        LaunchOption(
            "slurm_args",
            ("--slurm-args",),
            'more sbatch options, as one quoted string (--slurm-args "--exclusive --mem=0"; one alone: '
            "--slurm-args=--exclusive); one the launcher sets itself is refused, naming the option to give",
            metavar="ARGS",
        ),
        LaunchOption("namespace", ("--namespace",), "the TrainJob's Kubernetes namespace"),
        LaunchOption("image", ("--image",), "the pods' image, with hotswitch and torch"),
        LaunchOption("resources", ("--resources",), "per node, e.g. cpu=8,memory=32Gi,gpu=4"),
        LaunchOption(
            "runtime",
            ("--runtime",),
            "the TrainJob's ClusterTrainingRuntime, one for PyTorch (torchrun starts each node's ranks)",
            "torch-distributed",  # the one Kubeflow Trainer installs for PyTorch
        ),
        LaunchOption(
            "kubeflow_backend",
            ("--kubeflow-backend",),
            "kubernetes (default) or local (the SDK's local backend, one node here)",
            choices=KUBEFLOW_BACKENDS,
        ),
    ]


def _definitions() -> dict[str, LaunchOption]:
    options = [*_common(), *_launchers_own()]
    return {o.dest: LaunchOption(**{**o.__dict__, "owner": _owned(o.dest)}) for o in options}


OPTIONS: dict[str, LaunchOption] = _definitions()
# where ranks run: every launcher and its own options, in the order the help lists them
LAUNCHER_OPTIONS = ("launcher", "nodes", *(key for keys in OWN_OPTIONS.values() for key in keys))


def add_launch_options(add: Callable[..., Any], names: Iterable[str], **defaults: Any) -> None:
    """``add(*flags, **keywords)`` for each option of ``names`` (``parser.add_argument``);
    ``defaults`` replaces an option's default where a command resolves it later (``%%train
    --pool``'s ranks are the pool's: ``nproc=None``)."""
    for name in names:
        option = OPTIONS[name]
        keywords = option.keywords()
        if name in defaults:
            keywords["default"] = defaults[name]
        add(*option.flags, **keywords)


def magic_launch_options(names: Iterable[str], **defaults: Any) -> Callable:
    """A decorator giving an IPython magic the options of ``names``, in that order, as
    ``@argument(...)`` lines would."""
    from IPython.core.magic_arguments import argument

    collected: list[tuple[tuple, dict]] = []
    add_launch_options(lambda *flags, **kw: collected.append((flags, kw)), names, **defaults)

    def decorate(function: Callable) -> Callable:
        for flags, keywords in reversed(collected):  # the top decorator is the first argument
            function = argument(*flags, **keywords)(function)
        return function

    return decorate
