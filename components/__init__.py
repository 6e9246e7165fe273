"""Pulumi ComponentResources of the Rebel100 serving stack, one module each.

Kept import-free so that `components.sizing` can be used without loading Pulumi.
"""
