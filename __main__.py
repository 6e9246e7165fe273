"""Entry point of the Pulumi program (`pulumi up -s <stack>`); the work is in stacks/program.py."""

from stacks.program import main, refuse_unsafe_secrets

refuse_unsafe_secrets()
main()
