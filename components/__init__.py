"""Pulumi ComponentResources of the Rebel100 serving stack, one module each, built on `core`."""
