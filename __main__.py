"""Entry point of the Pulumi program (`pulumi up -s <stack>`); the work is in stacks/program.py."""

from core import collector
from stacks import sdk_runtime
from stacks.program import main, refuse_unsafe_secrets

collector.tune()
sdk_runtime.install()
refuse_unsafe_secrets()
main()
