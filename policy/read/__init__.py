"""Readers of manifests, one module per kind of object read (the policies judge what these read): `objects` any
manifest, `pods` pod templates and their routing sidecars, `flags` command lines, `engines` vLLM engines, `env`
environments, `devices` DRA claims and accelerators, `pool` the router's pool and EPP configs, `lmcache` LMCache."""
