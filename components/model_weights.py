"""ModelWeights: the volume the engines read their weights from, and (source `download`) the Job that fills it.

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

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components import pod
from core import serving
from core import weights as weight_files
from core.config import Weights

TYPE = "rebel100:serving:ModelWeights"
core = k8s.core.v1
batch = k8s.batch.v1

DOWNLOADER_UID = pod.NON_ROOT_UID
# A Job that failed to complete in an earlier `up` is replaced (and resumes from the volume) rather than
# waited for again.
REPLACE_UNREADY_ANNOTATION = "pulumi.com/replaceUnready"


class ModelWeightsArgs(pod.StackArgs):
    settings: Weights = Field(Weights(), description="The `weights` section: source, PVC, revisions, size, downloader.")
    model: str = Field("MiniMaxAI/MiniMax-M2.7", description="Hugging Face id of the served model.")
    draft_model: Optional[str] = Field(None, description="Hugging Face id of the EAGLE-3 draft model; None without one.")
    storage_class: Optional[str] = Field(None, description="StorageClass of the PVC the stack creates (ReadWriteMany); None: the cluster default.")
    retain_on_delete: bool = Field(True, description="Keep the downloaded volume in the cluster when the stack deletes it.")
    hf_token_secret: str = Field("hf-token", description="Secret with the Hugging Face token under key `token`.")


def download_container(args: ModelWeightsArgs, plan: weight_files.Plan) -> core.ContainerArgs:
    """`snapshot_download` of each repository at its revision into $HF_HOME/hub, as a non-root user."""
    hf_home = serving.HF_HOME
    return core.ContainerArgs(
        name="download",
        image=args.settings.downloader_image,
        command=["sh", "-c", weight_files.DOWNLOAD_SHELL, *weight_files.download_args(plan, hf_home)],
        env=[
            core.EnvVarArgs(name="HF_HOME", value=hf_home),
            core.EnvVarArgs(name="HF_HUB_DISABLE_TELEMETRY", value="1"),
            core.EnvVarArgs(name="HOME", value="/tmp"),
            core.EnvVarArgs(name="PYTHONPATH", value="/tmp/pip"),
            core.EnvVarArgs(name="HUB_VERSION", value=args.settings.huggingface_hub_version),
            core.EnvVarArgs(name="DOWNLOAD", value=weight_files.DOWNLOAD_PYTHON),
            # Public repositories download without a token, so the Secret may be absent unless they are gated.
            core.EnvVarArgs(name="HF_TOKEN", value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(
                name=args.hf_token_secret, key="token", optional=not args.settings.gated))),
        ],
        volume_mounts=[core.VolumeMountArgs(name="model", mount_path=hf_home),
                       core.VolumeMountArgs(name="tmp", mount_path="/tmp")],
        resources=core.ResourceRequirementsArgs(requests={"cpu": "2", "memory": "4Gi"}, limits={"cpu": "4", "memory": "8Gi"}),
        security_context=pod.restricted_security_context(),
    )


class ModelWeights(pulumi.ComponentResource):
    claim_name: str
    job: Optional[batch.Job]
    engine_weights: pod.EngineWeights

    def __init__(self, name: str, args: ModelWeightsArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        settings = args.settings
        plan = weight_files.plan_for(args.model, settings, args.draft_model, serving.HF_HOME)
        self.claim_name = settings.pvc
        self.job = None
        self.engine_weights = pod.EngineWeights(
            claim_name=settings.pvc, revision=settings.revision, draft_revision=settings.draft_revision,
            wait_paths=list(plan.wait_paths), waiter_image=settings.downloader_image)
        if plan.download:
            self.job = self._download(name, args, plan, opts)
        self.register_outputs({
            "claimName": self.claim_name,
            "source": settings.source,
            "jobName": self.job.metadata.name if self.job is not None else None,
            "waitPaths": list(plan.wait_paths),
        })

    def _download(self, name: str, args: ModelWeightsArgs, plan: weight_files.Plan,
                  opts: Optional[pulumi.ResourceOptions]) -> batch.Job:
        child = pod.child_options(self, opts)
        labels = {pod.PART_OF_LABEL: args.stack_name, pod.COMPONENT_LABEL: "model-weights"}
        volume = core.PersistentVolumeClaim(
            f"{name}-pvc", metadata=pod.object_meta(args.settings.pvc, args.namespace, labels, plan.annotations()),
            spec=core.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"], storage_class_name=args.storage_class,
                resources=core.VolumeResourceRequirementsArgs(requests={"storage": args.settings.size})),
            opts=pod.data_volume_options(child, args.retain_on_delete))
        timeout = f"{args.settings.timeout_minutes}m"
        return batch.Job(
            f"{name}-download",
            metadata=pod.object_meta(f"{args.stack_name}-weights-{plan.key}", args.namespace, labels,
                                     {**plan.annotations(), REPLACE_UNREADY_ANNOTATION: "true"}),
            spec=batch.JobSpecArgs(
                backoff_limit=args.settings.retries,
                template=core.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=core.PodSpecArgs(
                        restart_policy="OnFailure",
                        automount_service_account_token=False,
                        security_context=core.PodSecurityContextArgs(
                            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
                            run_as_non_root=True, run_as_user=DOWNLOADER_UID, run_as_group=DOWNLOADER_UID,
                            fs_group=DOWNLOADER_UID, fs_group_change_policy="OnRootMismatch"),
                        containers=[download_container(args, plan)],
                        volumes=[
                            core.VolumeArgs(name="model", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(
                                claim_name=args.settings.pvc)),
                            core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="2Gi")),
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[volume], custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout))),
        )
