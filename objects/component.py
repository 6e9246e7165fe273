"""What every component's objects share: the args each component is given (`StackArgs`, its name prefix and
namespace) and the labels and annotations its objects carry."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core import weights as weight_files
from core.formats import Dns1123Label
from core.labels import PART_OF_LABEL

COMPONENT_LABEL = "app.kubernetes.io/component"
NAME_LABEL = "app.kubernetes.io/name"
SERVING_LABEL = "llm-d.ai/inference-serving"

POOL_LABEL = "rebel100.ai/pool"  # one value per Deployment, so that groups of one role stay apart
SECURITY_EXCEPTIONS_ANNOTATION = "rebel100.ai/security-exceptions"
MODEL_REVISION_ANNOTATION = weight_files.REVISION_ANNOTATION  # a new revision rolls the engines


class StackArgs(BaseModel):
    """What every component of the stack is given: its name prefix and its namespace."""

    model_config = ConfigDict(frozen=True)

    stack_name: str = Field(description="Prefix of object names and value of app.kubernetes.io/part-of.")
    namespace: Dns1123Label = Field(description="Namespace of the component's objects.")


def pool_selector(stack_name: str) -> dict[str, str]:
    """Labels the InferencePool selects: every serving pod of this stack, whatever its role."""
    return {PART_OF_LABEL: stack_name, SERVING_LABEL: "true"}
