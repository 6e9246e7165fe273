"""Rule 7: hygiene every serving pod needs whoever wrote it.

The Hugging Face token only through a Secret reference (a literal lands in the state file, in
`kubectl get -o yaml` and in git); images pinned to a tag or digest (`latest` changes under a running
stack and makes a rollback redeploy something else); CPU and memory requests on the engines (without
them the scheduler packs engines onto nodes whose CPU the NPU runtime needs, and they are evicted first).
"""
from __future__ import annotations

from policy.facts import Facts
from policy.manifests import Finding, engines, env_entry, image_tag, pod_templates

TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def hf_token_secret_ref(manifests: list[dict], facts: Facts) -> list[Finding]:
    """HF_TOKEN only from `valueFrom.secretKeyRef`."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            for name in TOKEN_ENV:
                entry = env_entry(container, name)
                if entry is None:
                    continue
                if "value" in entry:
                    found.append(Finding(template.resource,
                        f"container {container.get('name')} env {name} is a literal value: the token ends up in the "
                        f"stack state, the rendered YAML and anyone's `kubectl get -o yaml`. Use valueFrom.secretKeyRef "
                        f"to a Secret (rebel100:hfTokenSecret, key token)."))
                elif not (entry.get("valueFrom") or {}).get("secretKeyRef"):
                    source = ", ".join(entry.get("valueFrom") or {}) or "nothing"
                    found.append(Finding(template.resource,
                        f"container {container.get('name')} env {name} comes from {source}, not from a Secret: "
                        f"ConfigMaps and fields are not access-controlled as secrets. Use valueFrom.secretKeyRef."))
    return found


def image_tag_pinned(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every container image has a tag other than `latest`, or a digest."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            image = str(container.get("image") or "")
            _, tag, digest = image_tag(image)
            if digest:
                continue
            if not image or tag is None or tag == "latest":
                what = "has no image" if not image else (f"image {image} is untagged (pulls latest)" if tag is None
                                                         else f"image {image} uses the latest tag")
                found.append(Finding(template.resource,
                    f"container {container.get('name')} {what}: the image can change under a running stack and a "
                    f"rollback redeploys something else. Pin a version tag or a digest (image@sha256:...)."))
    return found


def engine_resource_requests(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Engine containers request CPU and memory (requests, or limits that Kubernetes copies into requests)."""
    found = []
    for engine in engines(manifests):
        resources = engine.container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        missing = [name for name in ("cpu", "memory") if name not in requests and name not in limits]
        if missing:
            found.append(Finding(engine.resource,
                f"engine container {engine.name} sets no resources.requests.{' or '.join(missing)}: the scheduler "
                f"may pack it next to other pods on a node whose CPU and memory the NPU runtime, tokenizer and "
                f"KV offload need, and it is evicted first under pressure. Set resources.requests (and limits) "
                f"{' and '.join(missing)}."))
    return found
