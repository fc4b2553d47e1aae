import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [lines[i + 1] for i, line in enumerate(lines[:20]) if line.startswith("```bash")]


def test_ci_runs_exactly_the_readme_test_command():
    commands = readme_commands()
    assert len(commands) == 2, "the README opens with two commands: main job, then tests"
    ci_commands = [
        line
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_commands == [commands[1]]
    assert "pytest" in commands[1]


def test_the_readme_is_a_landing_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"the README has {len(lines)} lines; move the detail to docs/"
    linked = re.findall(r"\]\((docs/[\w.-]+\.md|[A-Z]+(?:\.md)?)\)", "\n".join(lines))
    assert linked and [path for path in linked if not (ROOT / path).is_file()] == []


def test_the_command_line_guide_covers_every_subcommand():
    usage = subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    subcommands = re.search(r"\{([a-z,-]+)\}", usage).group(1).split(",")
    guide = (ROOT / "docs" / "command-line.md").read_text()
    assert [name for name in subcommands if f"`hotswitch {name}" not in guide] == []
