"""The Kubernetes objects of each component, as plain data: no Pulumi.

One module per component holds its typed args and a function from (name, args) to the objects it
owns (`manifests.Child`: the manifest and what Pulumi needs to register it). The components in
`components/` register exactly these; `stacks.render` writes them without starting Pulumi at all.
"""
