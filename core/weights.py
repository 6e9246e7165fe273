"""Model weights on the volume: known sizes, revision keys, cache paths and the two scripts.

The volume holds a Hugging Face cache (`$HF_HOME/hub`), the layout `vllm serve <model id>` reads
with `HF_HUB_OFFLINE=1`: each revision is its own `snapshots/<commit>` folder of links to
content-addressed blobs, so a revision bump adds a snapshot next to the old one (unchanged files are
not downloaded again) and an engine started with `--revision X` reads X's files only, never a mix.

A download is keyed by a digest of (model, revision, draft, draft revision): the Job's name and the
completion marker it writes last both carry it, so a changed revision is a new Job (a replacement in
`pulumi preview`) and engines wait for the new marker, not the old one. Plain values only (no Pulumi).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from core.config import COMMIT_SHA, Speculative, StackConfig, Weights

GB = 1000**3

# Bytes of the weights in a Hugging Face repository, as downloaded (all files of one revision).
# Unverified: MiniMax-M2.7 is taken to be the ~230B-parameter MoE of MiniMax-M2 in FP8 (one byte per
# parameter plus scales, tokenizer and config: ~230 GB); the EAGLE-3 draft is one decoder layer plus a
# 200k-vocabulary head in bf16, taken as at most 4 GB. Measure with `hf download --dry-run` or the
# repository's file list and correct these figures when the revision is pinned.
MODEL_BYTES = {
    "MiniMaxAI/MiniMax-M2.7": 230 * GB,
    "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k": 4 * GB,
}
# Room above the weights: filesystem overhead, `.incomplete` files of an interrupted download and the
# files of a second revision that shares most blobs with the first.
HEADROOM = 1.2

MARKER_DIR = ".rebel100"
MODEL_ANNOTATION = "rebel100.ai/model"
REVISION_ANNOTATION = "rebel100.ai/model-revision"
DRAFT_ANNOTATION = "rebel100.ai/draft-model"
DRAFT_REVISION_ANNOTATION = "rebel100.ai/draft-revision"


def is_pinned(revision: str) -> bool:
    """A commit id names fixed files; a branch (`main`) or tag can move under the stack."""
    return re.fullmatch(COMMIT_SHA, revision) is not None


def digest(model: str, revision: str, draft: str | None, draft_revision: str) -> str:
    """Short key of what a download holds: changes with any of the four values."""
    text = json.dumps([model, revision, draft, draft_revision if draft else None])
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def repo_folder(model: str) -> str:
    """`MiniMaxAI/MiniMax-M2.7` -> `models--MiniMaxAI--MiniMax-M2.7` (huggingface_hub's cache folder)."""
    return "models--" + model.replace("/", "--")


def revision_path(hf_home: str, model: str, revision: str) -> str:
    """What exists in the cache once a revision is there: its snapshot (a commit) or its ref (a branch/tag)."""
    base = f"{hf_home}/hub/{repo_folder(model)}"
    return f"{base}/snapshots/{revision}" if is_pinned(revision) else f"{base}/refs/{revision}"


def marker_path(hf_home: str, key: str) -> str:
    """Written by the download Job after every file of every repository is in place."""
    return f"{hf_home}/{MARKER_DIR}/weights-{key}.complete"


def needed_bytes(model: str, draft: str | None) -> int | None:
    """Known size of the model plus the draft; None when one of them is not in MODEL_BYTES."""
    repos = [model] + ([draft] if draft else [])
    if any(repo not in MODEL_BYTES for repo in repos):
        return None
    return sum(MODEL_BYTES[repo] for repo in repos)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The weights of one stack: what the engines read and, for a download, what the Job writes."""

    source: str
    claim_name: str
    model: str
    revision: str
    draft: str | None
    draft_revision: str
    key: str
    wait_paths: tuple[str, ...]

    @property
    def download(self) -> bool:
        return self.source == "download"

    def repositories(self) -> list[tuple[str, str]]:
        return [(self.model, self.revision)] + ([(self.draft, self.draft_revision)] if self.draft else [])

    def annotations(self) -> dict[str, str]:
        """What the volume holds, on the Job (and read back by the policy pack)."""
        found = {MODEL_ANNOTATION: self.model, REVISION_ANNOTATION: self.revision}
        if self.draft:
            found.update({DRAFT_ANNOTATION: self.draft, DRAFT_REVISION_ANNOTATION: self.draft_revision})
        return found

    def output(self) -> dict[str, object]:
        return {
            "source": self.source,
            "pvc": self.claim_name,
            "model": f"{self.model}@{self.revision}",
            "draft": f"{self.draft}@{self.draft_revision}" if self.draft else None,
            "key": self.key,
        }


def token_required(settings: Weights) -> bool:
    """Whether a pod given the token must not start without its Secret: only a gated repository needs the token (a
    public one downloads without it, and the engines read the weights from the volume). Elsewhere the reference is
    optional, so a stack without `rebel100:hfToken` starts: a kubelet refuses a container whose required Secret is
    missing, and KEDA refuses to scale a Deployment whose container it cannot resolve."""
    return settings.gated


def draft_model(spec: Speculative | None) -> str | None:
    """The EAGLE-3 draft the engines load (None without one) with decode's resolved speculative config (which
    prefill's equals: config gate); the derived facts' weights plan holds it (`core.derive`, its `weights.draft`)."""
    return spec.model if spec is not None and spec.method == "eagle3" and spec.model else None


def plan_for(model: str, settings: Weights, draft: str | None, hf_home: str) -> Plan:
    """The weights plan of a model, its draft (None without one) and the `weights` section."""
    key = digest(model, settings.revision, draft, settings.draft_revision)
    if settings.source == "download":
        waits: tuple[str, ...] = (marker_path(hf_home, key),)
    else:
        repos = [(model, settings.revision)] + ([(draft, settings.draft_revision)] if draft else [])
        waits = tuple(revision_path(hf_home, repo, revision) for repo, revision in repos)
    return Plan(
        source=settings.source,
        claim_name=settings.pvc,
        model=model,
        revision=settings.revision,
        draft=draft,
        draft_revision=settings.draft_revision,
        key=key,
        wait_paths=waits,
    )


def plan(cfg: StackConfig, speculative: Speculative | None, hf_home: str) -> Plan:
    """The weights plan of a stack whose decode engines run `speculative` (as the derived facts resolve it)."""
    return plan_for(cfg.model.name, cfg.weights, draft_model(speculative), hf_home)


# --- the scripts ---------------------------------------------------------------------------

# The Job: install huggingface_hub into /tmp when the image has none, then download each repository at
# its revision into $HF_HOME/hub and write the marker last. A retried pod finds the finished files in
# place and resumes the `.incomplete` ones (huggingface_hub resumes partial blobs).
DOWNLOAD_SHELL = (
    "set -eu\n"
    'python3 -c "import huggingface_hub" 2>/dev/null || '
    'pip install --quiet --no-cache-dir --target /tmp/pip "huggingface_hub==$HUB_VERSION"\n'
    'exec python3 -c "$DOWNLOAD" "$@"\n'
)
DOWNLOAD_PYTHON = (
    "import json, os, pathlib, sys\n"
    "from huggingface_hub import snapshot_download\n"
    "marker, pairs = pathlib.Path(sys.argv[1]), sys.argv[2:]\n"
    "if marker.exists():\n"
    "    print(f'{marker} exists: nothing to download', flush=True)\n"
    "    sys.exit(0)\n"
    "done = {}\n"
    "for repo, revision in zip(pairs[::2], pairs[1::2]):\n"
    "    print(f'downloading {repo}@{revision} into {os.environ[\"HF_HOME\"]}/hub', flush=True)\n"
    "    done[repo] = snapshot_download(repo_id=repo, revision=revision)\n"
    "    print(f'{repo}@{revision}: {done[repo]}', flush=True)\n"
    "marker.parent.mkdir(parents=True, exist_ok=True)\n"
    "partial = marker.with_suffix('.partial')\n"
    "partial.write_text(json.dumps({'snapshots': done, 'repositories': pairs}))\n"
    "partial.rename(marker)\n"
    "print(f'complete: {marker}', flush=True)\n"
)


def download_args(weights: Plan, hf_home: str) -> list[str]:
    """`sh -c DOWNLOAD_SHELL download <marker> <repo> <revision> [<draft> <revision>]`."""
    pairs = [word for pair in weights.repositories() for word in pair]
    return ["download", marker_path(hf_home, weights.key), *pairs]


# The engines' init container: wait until every path exists (the marker of a download; the snapshot or
# ref of each repository on a pre-loaded PVC), saying what it waits for.
WAIT_SHELL = (
    'for path in "$@"; do\n'
    '  until [ -e "$path" ]; do echo "waiting for $path (model weights not on the volume yet)"; sleep 30; done\n'
    "done\n"
)
