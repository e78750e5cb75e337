"""``python -m agentfsm``: the CLI."""

from agentfsm.cli import main

main()
