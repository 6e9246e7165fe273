"""The local site's stand-in for the Prometheus Operator (localsite/autoscaler.py): a PodMonitor becomes the scrape
job and the targets the Operator would make of it (job `podMonitor/<namespace>/<name>/<index>`, the pods the selector
picks at the named container port, labels namespace/pod/container/endpoint). Expected values written by hand."""

from __future__ import annotations

import pathlib

from localsite import autoscaler

MONITOR = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PodMonitor",
    "metadata": {"name": "minimax-m27-decode", "namespace": "rebel100"},
    "spec": {
        "selector": {"matchLabels": {"llm-d.ai/role": "decode"}},
        "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "5s"}],
    },
}


def pod(name: str, role: str, ip: str = "127.1.0.7", phase: str = "Running", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": "rebel100", "labels": {"llm-d.ai/role": role}, **meta},
        "spec": {
            "containers": [
                {"name": "sidecar", "ports": [{"name": "http", "containerPort": 8000}]},
                {"name": "vllm", "ports": [{"name": "metrics", "containerPort": 8200}, {"containerPort": 5557}]},
            ]
        },
        "status": {"phase": phase, "podIP": ip},
    }


def test_a_pod_monitor_becomes_one_job_per_endpoint_over_a_targets_file():
    config = autoscaler.scrape_config([MONITOR], pathlib.Path("/t"), pathlib.Path("/s"))
    assert config["scrape_configs"] == [
        {
            "job_name": "podMonitor/rebel100/minimax-m27-decode/0",
            "scrape_interval": "5s",
            "metrics_path": "/metrics",
            "scheme": "http",
            "file_sd_configs": [
                {"files": ["/t/podMonitor_rebel100_minimax-m27-decode_0.json"], "refresh_interval": "5s"}
            ],
        }
    ]


def test_targets_are_the_selected_running_pods_at_the_named_port_with_the_operators_labels():
    pods = [
        pod("d-1", "decode", "127.1.0.7"),
        pod("p-1", "prefill", "127.1.0.8"),  # not selected
        pod("d-2", "decode", "127.1.0.9", phase="Pending"),  # not running
        pod("d-3", "decode", "127.1.0.10", deletionTimestamp="2026-12-01T00:00:00Z"),  # going
        pod("d-4", "decode", ""),  # no IP yet
    ]
    assert autoscaler.scrape_targets([MONITOR], pods) == {
        "podMonitor/rebel100/minimax-m27-decode/0": [
            {
                "targets": ["127.1.0.7:8200"],
                "labels": {"namespace": "rebel100", "pod": "d-1", "container": "vllm", "endpoint": "metrics"},
            }
        ]
    }


def test_a_pod_of_another_namespace_is_not_a_target():
    other = pod("d-1", "decode")
    other["metadata"]["namespace"] = "elsewhere"
    assert autoscaler.scrape_targets([MONITOR], [other]) == {"podMonitor/rebel100/minimax-m27-decode/0": []}


def test_triggers_on_another_prometheus_are_named_with_the_key_to_set():
    scaled = [{"spec": {"triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://prom:9090"}}]}}]
    message = autoscaler.describe_mismatch(autoscaler.trigger_addresses(scaled))
    assert message is not None
    assert "http://prom:9090" in message and "rebel100:observability.prometheusAddress" in message
    assert "http://127.1.255.254:9090" in message
    ours = [
        {"spec": {"triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://127.1.255.254:9090"}}]}}
    ]
    assert autoscaler.describe_mismatch(autoscaler.trigger_addresses(ours)) is None


def test_the_api_service_reaches_the_relay_through_an_external_name_service():
    objects = {o["kind"]: o for o in autoscaler.site_objects(31234)}
    assert objects["Service"]["spec"] == {
        "type": "ExternalName",
        "externalName": "localhost",
        "ports": [{"name": "https", "port": 31234, "protocol": "TCP"}],
    }
    assert objects["APIService"]["metadata"]["name"] == "v1beta1.external.metrics.k8s.io"
    assert objects["APIService"]["spec"]["service"] == {
        "namespace": "keda",
        "name": "keda-metrics-apiserver",
        "port": 31234,
    }
    assert autoscaler.object_path(objects["APIService"]) == (
        "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.external.metrics.k8s.io"
    )
    assert autoscaler.object_path(objects["Service"]) == "/api/v1/namespaces/keda/services/keda-metrics-apiserver"


def test_an_endpoints_bearer_secret_becomes_a_credentials_file_the_site_writes():
    monitor = {
        "metadata": {"name": "minimax-m27-epp", "namespace": "rebel100"},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/component": "router"}},
            "podMetricsEndpoints": [
                {
                    "port": "metrics",
                    "interval": "30s",
                    "authorization": {"credentials": {"name": "minimax-m27-metrics-reader-token", "key": "token"}},
                }
            ],
        },
    }
    (job,) = autoscaler.scrape_config([monitor], pathlib.Path("/t"), pathlib.Path("/s"))["scrape_configs"]
    assert job["authorization"] == {
        "type": "Bearer",
        "credentials_file": "/s/rebel100_minimax-m27-metrics-reader-token_token",
    }
    assert autoscaler.secret_selectors([monitor, MONITOR]) == {
        ("rebel100", "minimax-m27-metrics-reader-token", "token")
    }
    (plain,) = autoscaler.scrape_config([MONITOR], pathlib.Path("/t"), pathlib.Path("/s"))["scrape_configs"]
    assert "authorization" not in plain


def test_the_site_builds_the_keda_release_whose_crd_the_stack_renders_for():
    """scripts/consumers (standard library only, no project import) names KEDA's version again: the same as
    core.autoscaling's, which crds/ and the render follow."""
    from core.autoscaling import KEDA_VERSION

    consumers = (pathlib.Path(__file__).resolve().parents[2] / "scripts" / "consumers").read_text()
    assert f'KEDA_VERSION = "{KEDA_VERSION}"' in consumers
