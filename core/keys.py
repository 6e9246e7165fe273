"""The config namespace and its secret keys: constants that `core.config` (the schema) and `core.stackfile`
(reading a stack file) share. A module of its own so that reading a stack file (`python -m stacks secrets`,
run by every `scripts/preview` and `scripts/up`) does not build the pydantic schema."""

NAMESPACE = "rebel100"
# Keys of the namespace that are not part of the schema but are read by the program.
SECRET_KEYS = {"hfToken": "Hugging Face token (set with `pulumi config set --secret rebel100:hfToken`)."}
