"""ModelWeights' objects: the volume the engines read their weights from, and (source `download`) the Job that fills it.

`pvc`: a PersistentVolumeClaim someone loaded beforehand; nothing is created, the engines wait until
the snapshot of each repository is on it. `download`: a ReadWriteMany PVC sized by `weights.size`
(kept on destroy like the other data volumes) and a Job that downloads the model and the EAGLE-3
draft at their revisions into the Hugging Face cache on it, then writes a completion marker. The
Job is named after a digest of (model, revision, draft, draft revision): a new revision is a new Job,
a replacement in `pulumi preview`, and the engines depend on it (Pulumi waits for the Job to
complete before it updates them) and wait in an init container for its marker (the cluster enforces
it, also for a render applied with kubectl).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core import serving
from core import weights as weight_files
from core.config import Weights
from core.formats import Dns1123Subdomain
from core.labels import PART_OF_LABEL
from objects import component, manifests, pod
from objects.manifests import Child, manifest, object_meta

DOWNLOADER_UID = manifests.NON_ROOT_UID
# A Job that failed to complete in an earlier `up` is replaced (and resumes from the volume) rather than
# waited for again.
REPLACE_UNREADY_ANNOTATION = "pulumi.com/replaceUnready"


class ModelWeightsArgs(component.StackArgs):
    settings: Weights = Field(description="The `weights` section: source, PVC, revisions, size, downloader.")
    model: str = Field(description="Hugging Face id of the served model.")
    draft_model: str | None = Field(description="Hugging Face id of the EAGLE-3 draft model; None without one.")
    storage_class: Dns1123Subdomain | None = Field(
        description="StorageClass of the PVC the stack creates (ReadWriteMany); None: the cluster default."
    )
    retain_on_delete: bool = Field(description="Keep the downloaded volume in the cluster when the stack deletes it.")
    hf_token_secret: Dns1123Subdomain = Field(description="Secret with the Hugging Face token under key `token`.")


def plan(args: ModelWeightsArgs) -> weight_files.Plan:
    return weight_files.plan_for(args.model, args.settings, args.draft_model, serving.HF_HOME)


def engine_weights(args: ModelWeightsArgs) -> pod.EngineWeights:
    """What the engine pods are told about their weights: the volume, the revisions, the paths to wait for."""
    settings = args.settings
    return pod.EngineWeights(
        claim_name=settings.pvc,
        revision=settings.revision,
        draft_revision=settings.draft_revision,
        wait_paths=list(plan(args).wait_paths),
        waiter_image=settings.downloader_image,
    )


def download_container(args: ModelWeightsArgs, plan: weight_files.Plan) -> dict[str, Any]:
    """`snapshot_download` of each repository at its revision into $HF_HOME/hub, as a non-root user."""
    hf_home = serving.HF_HOME
    return {
        "name": "download",
        "image": args.settings.downloader_image,
        "command": ["sh", "-c", weight_files.DOWNLOAD_SHELL, *weight_files.download_args(plan, hf_home)],
        "env": [
            {"name": "HF_HOME", "value": hf_home},
            {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
            {"name": "HOME", "value": "/tmp"},
            {"name": "PYTHONPATH", "value": "/tmp/pip"},
            {"name": "HUB_VERSION", "value": args.settings.huggingface_hub_version},
            {"name": "DOWNLOAD", "value": weight_files.DOWNLOAD_PYTHON},
            # Public repositories download without a token, so the Secret may be absent unless they are gated.
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {
                        "name": args.hf_token_secret,
                        "key": "token",
                        "optional": not weight_files.token_required(args.settings),
                    }
                },
            },
        ],
        "volumeMounts": [{"name": "model", "mountPath": hf_home}, {"name": "tmp", "mountPath": "/tmp"}],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
        "securityContext": manifests.restricted_security_context(),
    }


def job_resource_name(name: str) -> str:
    return f"{name}-download"


def model_weights(name: str, args: ModelWeightsArgs) -> list[Child]:
    """Nothing for a pre-loaded PVC; the PVC and the download Job otherwise."""
    weights_plan = plan(args)
    if not weights_plan.download:
        return []
    settings = args.settings
    labels = {PART_OF_LABEL: args.stack_name, component.COMPONENT_LABEL: "model-weights"}
    volume = Child(
        f"{name}-pvc",
        manifests.volume_claim(
            name=settings.pvc,
            namespace=args.namespace,
            labels=labels,
            size=settings.size,
            storage_class=args.storage_class,
            annotations=weights_plan.annotations(),
        ),
        retain_on_delete=args.retain_on_delete,
    )
    job = manifest(
        "batch/v1",
        "Job",
        object_meta(
            f"{args.stack_name}-weights-{weights_plan.key}",
            args.namespace,
            labels,
            {**weights_plan.annotations(), REPLACE_UNREADY_ANNOTATION: "true"},
        ),
        spec={
            "backoffLimit": settings.retries,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "seccompProfile": {"type": "RuntimeDefault"},
                        "runAsNonRoot": True,
                        "runAsUser": DOWNLOADER_UID,
                        "runAsGroup": DOWNLOADER_UID,
                        "fsGroup": DOWNLOADER_UID,
                        "fsGroupChangePolicy": "OnRootMismatch",
                    },
                    "containers": [download_container(args, weights_plan)],
                    "volumes": [
                        {"name": "model", "persistentVolumeClaim": {"claimName": settings.pvc}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
                    ],
                },
            },
        },
    )
    return [
        volume,
        Child(job_resource_name(name), job, after=(volume.resource_name,), timeout=f"{settings.timeout_minutes}m"),
    ]
