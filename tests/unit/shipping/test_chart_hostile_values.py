"""charts/gpu-autoscaler under hostile values: each one is either refused by values.schema.json (Helm fails
naming the field) or reaches the manifests as one quoted string, which parses back to exactly the objects
of the defaults with that one field changed: no extra container, no extra document, nothing else touched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.shipping.helm_chart import Object, render, validate

INJECTED_CONTAINER = ("\n        - name: evil\n          image: evil\n"
                      "          securityContext: {privileged: true}")
DIGEST = "sha256:" + "0123456789abcdef" * 4


def workloads(objects: list[Object]) -> list[Object]:
    return [o for o in objects if o["kind"] in ("DaemonSet", "Deployment")]


def containers(objects: list[Object]) -> list[Object]:
    return [c for o in workloads(objects) for c in o["spec"]["template"]["spec"]["containers"]]


def rules_configmap(objects: list[Object]) -> Object:
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] ==
                    "gpu-autoscaler-rules"]
    return configmap


def refused(values: dict[str, Any], field: str) -> None:
    """Helm refuses `values`, naming `field` (a JSON pointer: /image/tag), before rendering anything."""
    with pytest.raises(helm.HelmValuesError, match=f"'{field}'"):
        validate(values)
    with pytest.raises(helm.HelmValuesError, match=f"'{field}'"):
        render(values)


def rendered_as(values: dict[str, Any], change: Callable[[list[Object]], None]) -> None:
    """`values` render exactly the default objects with `change` applied to them."""
    expected = render().objects
    change(expected)
    got = render(values).objects
    assert len(containers(got)) == len(containers(expected)) == 2
    assert got == expected


@pytest.mark.parametrize(("values", "field"), [
    ({"image": {"tag": "1.0" + INJECTED_CONTAINER}}, "/image/tag"),
    ({"image": {"repository": "ghcr.io/x" + INJECTED_CONTAINER}}, "/image/repository"),
    ({"image": {"tag": "---"}}, "/image/tag"),
    ({"image": {"tag": "a: x"}}, "/image/tag"),
    ({"image": {"tag": "-leading-dash"}}, "/image/tag"),
    ({"image": {"tag": "x" * 129}}, "/image/tag"),
    ({"image": {"repository": "ghcr.io/Gpu-Autoscaler/x"}}, "/image/repository"),
    ({"image": {"repository": "ghcr.io/a//b"}}, "/image/repository"),
    ({"image": {"repository": "ghcr.io:port/a"}}, "/image/repository"),
    ({"image": {"repository": "a/" + "b" * 254}}, "/image/repository"),
    ({"image": {"digest": "sha256:abc"}}, "/image/digest"),
    ({"image": {"digest": DIGEST + "\nx: y"}}, "/image/digest"),
    ({"controller": {"replicas": 2147483648}}, "/controller/replicas"),
    ({"controller": {"replicas": 11}}, "/controller/replicas"),
    ({"controller": {"replicas": 1.5}}, "/controller/replicas"),
    ({"controller": {"resources": {"limits": {"cpu": "1\n  x: y"}}}}, "/controller/resources/limits/cpu"),
    ({"exporter": {"resources": {"requests": {"memory": -1}}}}, "/exporter/resources/requests/memory"),
    ({"exporter": {"resources": {"requests": {"memory": 1e300}}}}, "/exporter/resources/requests/memory"),
    ({"exporter": {"resources": {"requests": {"bad key\n": "1"}}}}, "/exporter/resources/requests"),
    ({"exporter": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 2**31}]}},
     "/exporter/tolerations/0/tolerationSeconds"),
    ({"controller": {"rules": "rules: []\x00"}}, "/controller/rules"),
    ({"controller": {"rules": "rules: []\x85x: 1"}}, "/controller/rules"),
    ({"controller": {"prometheus": {"url": "http://p:9090\n  x: y"}}}, "/controller/prometheus/url"),
    ({"exporter": {"runtimeClassName": "nvidia\nx: y"}}, "/exporter/runtimeClassName"),
    ({"webConfig": {"secretName": "web\n---"}}, "/webConfig/secretName"),
    ({"commonLabels": {"team": "ml\n---\nkind: Pod"}}, "/commonLabels/team"),
    ({"commonLabels": {"team\n---": "ml"}}, "/commonLabels"),
    ({"commonAnnotations": {"owner": "a\x7fb"}}, "/commonAnnotations/owner"),
    ({"exporter": {"nodeSelector": {"pool": "gpu: x"}}}, "/exporter/nodeSelector/pool"),
    ({"controller": {"tolerations": [{"key": "k\nx", "operator": "Exists"}]}},
     "/controller/tolerations/0/key"),
    ({"controller": {"affinity": {"nodeAffinity": {"x": ["a\x00"]}}}},
     "/controller/affinity/nodeAffinity/x/0"),
], ids=["tag-injects-a-container", "repository-injects-a-container", "tag-document-marker", "tag-mapping",
        "tag-leading-dash", "tag-too-long", "repository-upper-case-path", "repository-empty-component",
        "repository-port-not-a-number", "repository-too-long", "digest-too-short", "digest-with-yaml",
        "replicas-past-int32", "replicas-past-the-bound", "replicas-fraction", "quantity-with-yaml",
        "quantity-negative", "quantity-huge", "resource-name", "toleration-seconds", "rules-nul",
        "rules-next-line", "url-with-yaml", "runtime-class-with-yaml", "secret-name-with-yaml",
        "label-value-with-yaml", "label-key-with-yaml", "annotation-control-character", "node-selector-value",
        "toleration-key", "affinity-control-character"])
def test_a_hostile_value_is_refused_naming_its_field(values: dict[str, Any], field: str) -> None:
    refused(values, field)


def set_image(image: str) -> Callable[[list[Object]], None]:
    def change(objects: list[Object]) -> None:
        for container in containers(objects):
            container["image"] = image
    return change


@pytest.mark.parametrize(("image", "expected"), [
    ({"repository": "registry.example:5000/team/gpu__autoscaler", "tag": "v1.2.3_rc-1"},
     "registry.example:5000/team/gpu__autoscaler:v1.2.3_rc-1"),
    ({"repository": "localhost/a.b-c", "tag": "1e3"}, "localhost/a.b-c:1e3"),
    ({"repository": "gpu-autoscaler", "tag": "true", "digest": DIGEST}, f"gpu-autoscaler:true@{DIGEST}"),
], ids=["registry-port-and-separators", "tag-that-reads-as-a-number", "digest"])
def test_every_image_the_grammar_allows_renders_as_written(image: dict[str, str], expected: str) -> None:
    rendered_as({"image": image}, set_image(expected))


def set_rules(text: str) -> Callable[[list[Object]], None]:
    def change(objects: list[Object]) -> None:
        rules_configmap(objects)["data"] = {"rules.yaml": text}
    return change


@pytest.mark.parametrize("text", [
    "  rules: []\nx: 1\n",
    "\n\n    rules: []\n",
    "rules: []\n---\nkind: Pod\n...\n",
    "rules: []\n: x\n",
    "rules: []",
    "rules: []\n\n\n",
    "\trules: [] \r\n# trailing spaces   \n",
    "rules: [] # \u2028 \u2029 \ufeff é",
    "|\n  rules: []\n",
], ids=["indented-first-line", "blank-then-indented", "document-markers", "bare-colon", "no-final-newline",
        "several-final-newlines", "tab-and-cr", "unicode-breaks", "block-indicator"])
def test_rules_text_renders_as_the_same_text_whatever_its_first_line(text: str) -> None:
    rendered_as({"controller": {"rules": text}}, set_rules(text))


YAML_SIGNIFICANT = list("ax1 \t\n\r:-#'\"|>{}[],&*!%@`?.\\\x85\u2028\ufeffé")
HOSTILE = st.text(st.sampled_from(YAML_SIGNIFICANT) | st.characters(), max_size=40)


@settings(max_examples=150, deadline=None)
@given(HOSTILE)
def test_any_rules_text_is_refused_or_mounted_exactly(text: str) -> None:
    values = {"controller": {"rules": text}}
    try:
        validate(values)
    except helm.HelmValuesError as error:
        assert "'/controller/rules'" in str(error)
        return
    rendered_as(values, set_rules(text))


@settings(max_examples=150, deadline=None)
@given(HOSTILE, st.sampled_from(["tag", "repository", "digest"]))
def test_any_image_field_is_refused_or_rendered_as_one_string(text: str, field: str) -> None:
    values = {"image": {field: text}}
    try:
        validate(values)
    except helm.HelmValuesError as error:
        assert f"'/image/{field}'" in str(error)
        return
    image = {"repository": "ghcr.io/gpu-autoscaler/gpu-autoscaler", "tag": "", "digest": ""} | {field: text}
    reference = f"{image['repository']}:{image['tag'] or '0.1.0'}"
    reference += f"@{image['digest']}" if image["digest"] else ""
    rendered_as(values, set_image(reference))


ANNOTATION_KEYS = st.from_regex(r"\A(?:[a-z0-9]{1,8}(?:\.[a-z0-9]{1,8}){0,2}/)?"
                                r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?\Z")


@settings(max_examples=100, deadline=None)
@given(ANNOTATION_KEYS, HOSTILE)
def test_any_annotation_is_refused_or_reaches_every_object_as_one_string(key: str, value: str) -> None:
    """Annotations, like labels and node selectors, go through toYaml: they arrive exactly as given, or a
    value YAML cannot carry (a control character, which Helm's toYaml would silently drop with the whole
    map) is refused."""
    values = {"commonAnnotations": {key: value}}
    try:
        validate(values)
    except helm.HelmValuesError as error:
        pointer = key.replace("~", "~0").replace("/", "~1")  # JSON pointer escapes
        assert f"'/commonAnnotations/{pointer}'" in str(error)
        return

    def change(objects: list[Object]) -> None:
        for obj in objects:
            obj["metadata"]["annotations"] = {key: value}
    rendered_as(values, change)


def test_an_annotation_with_yaml_and_document_markers_is_one_string() -> None:
    value = "x\n---\napiVersion: v1\nkind: Pod\n: y\n  indented"

    def change(objects: list[Object]) -> None:
        for obj in objects:
            obj["metadata"]["annotations"] = {"example.com/note": value}
    rendered_as({"commonAnnotations": {"example.com/note": value}}, change)
