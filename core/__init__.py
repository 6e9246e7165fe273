"""The bottom layer: the config schema, the facts derived from it, the rules and the config gate.

Nothing here imports Pulumi, so the gate, the components, the policy pack and the offline CLI all
judge a stack with the same functions (checked by tests/test_layers.py).
"""
