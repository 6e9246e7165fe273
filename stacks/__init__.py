"""Composition of the full stack from one stack's config, and the offline tools (`python -m stacks`)."""
