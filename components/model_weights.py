"""ModelWeights: the volume the engines read their weights from, and (source `download`) the Job that
fills it (`objects.model_weights`)."""

from __future__ import annotations

import pulumi

from components import resources
from objects.model_weights import ModelWeightsArgs, engine_weights, job_resource_name, model_weights
from objects.pod import EngineWeights

__all__ = ["ModelWeights", "ModelWeightsArgs"]

TYPE = "rebel100:serving:ModelWeights"


class ModelWeights(pulumi.ComponentResource):
    claim_name: str
    job: resources.KubeObject | None
    engine_weights: EngineWeights

    def __init__(self, name: str, args: ModelWeightsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        children = model_weights(name, args)
        made = resources.register(self, children, opts)
        self.claim_name = args.settings.pvc
        self.job = made.get(job_resource_name(name))
        self.engine_weights = engine_weights(args)
        job_names = [c.name for c in children if c.kind == "Job"]
        self.register_outputs(
            {
                "claimName": self.claim_name,
                "source": args.settings.source,
                "jobName": job_names[0] if job_names else None,
                "waitPaths": list(self.engine_weights.wait_paths),
            }
        )
