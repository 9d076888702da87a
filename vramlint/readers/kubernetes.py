"""Kubernetes manifests: the jobs their containers start, on the GPUs their pods ask for.

A workload (Deployment, StatefulSet, Job, Pod, a Kubeflow PyTorchJob, a LeaderWorkerSet) is read
as a cloud task (``readers/cloud.py``): each pod's ``nvidia.com/gpu`` limit is its GPUs, the
node selector names their type (GKE's ``cloud.google.com/gke-accelerator``, NVIDIA's
``nvidia.com/gpu.product``), and the pods that run one job together are its nodes (a
LeaderWorkerSet group of ``size`` pods, a PyTorchJob's Master and Worker replicas; a
Deployment's replicas are copies of one job each). The main container's ``command`` and ``args``
are its script (``sh -c "..."`` read as the script it runs; the vLLM image's entrypoint where the
container gives only ``args``), with the container's ``env`` and Kubernetes' own ``$(VAR)``
references. Ray's custom resources (RayService, RayJob, RayCluster) run their jobs from Python:
they are named, not read.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from vramlint.documents import Document, YamlDocuments

if TYPE_CHECKING:
    from vramlint.readers.cloud import CloudTask

WORKLOADS = frozenset({"Deployment", "StatefulSet", "Job", "Pod", "PyTorchJob", "LeaderWorkerSet", "CronJob"})
UNREAD_KINDS = frozenset({"RayService", "RayJob", "RayCluster", "InferenceService", "TrainJob", "MPIJob"})
# GKE's accelerator labels (cloud.google.com/gke-accelerator) -> vramlint's GPU names.
GKE = {"nvidia-l4": "L4", "nvidia-tesla-t4": "T4", "nvidia-tesla-a100": "A100-40GB", "nvidia-a100-80gb": "A100-80GB",
       "nvidia-h100-80gb": "H100", "nvidia-h100-mega-80gb": "H100", "nvidia-h200-141gb": "H200", "nvidia-b200": "B200",
       "nvidia-tesla-v100": "V100", "nvidia-l40s": "L40S", "nvidia-gb200": "GB200"}
# Images whose entrypoint starts the job when a container gives only args.
ENTRYPOINTS = {"vllm/vllm-openai": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}


def _objects(data: Any) -> list[tuple[int | None, dict]]:
    if isinstance(data, YamlDocuments):
        return [(i, d) for i, d in enumerate(data) if isinstance(d, dict)]
    return [(None, data)] if isinstance(data, dict) else []


def looks_like_kubernetes(data: Any) -> bool:
    """A manifest (or a stream of them) with a workload or a Ray resource among its objects."""
    return any(isinstance(obj.get("apiVersion"), str) and obj.get("kind") in WORKLOADS | UNREAD_KINDS
               for _, obj in _objects(data))


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _pods(obj: dict) -> list[tuple[str, dict, int]]:
    """(path, pod spec, how many pods of it run one job) of a workload."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return [("spec", spec, 1)]
    if kind == "LeaderWorkerSet":
        template = spec.get("leaderWorkerTemplate") or {}
        size = template.get("size") if isinstance(template.get("size"), int) else 1
        leader = "leaderTemplate" if isinstance(template.get("leaderTemplate"), dict) else "workerTemplate"
        return [(f"spec.leaderWorkerTemplate.{leader}.spec", _dig(template, leader, "spec") or {}, size)]
    if kind == "PyTorchJob":
        replicas = spec.get("pytorchReplicaSpecs") or {}
        total = sum(r.get("replicas", 1) for r in replicas.values() if isinstance(r, dict)
                    and isinstance(r.get("replicas", 1), int))
        first = "Master" if "Master" in replicas else next(iter(replicas), None)
        return [(f"spec.pytorchReplicaSpecs.{first}.template.spec", _dig(replicas, first, "template", "spec") or {},
                 max(1, total))] if first else []
    if kind == "CronJob":
        return [("spec.jobTemplate.spec.template.spec", _dig(spec, "jobTemplate", "spec", "template", "spec") or {}, 1)]
    return [("spec.template.spec", _dig(spec, "template", "spec") or {}, 1)]


def _gpu_type(pod: dict) -> str | None:
    selector = pod.get("nodeSelector") if isinstance(pod.get("nodeSelector"), dict) else {}
    label = selector.get("cloud.google.com/gke-accelerator")
    if isinstance(label, str):
        return GKE.get(label, label)
    product = selector.get("nvidia.com/gpu.product")
    if isinstance(product, str):                    # NVIDIA-H100-80GB-HBM3 -> H100-80GB
        found = re.search(r"(A100|H100|H200|B200|L40S|L4|A10G|T4|V100)(-\d+GB)?", product, re.I)
        return found.group(0).upper() if found else product
    return None


def _script(container: dict) -> tuple[str, str] | None:
    """(the script, the key that holds it) of a container: ``sh -c`` strings as written, else
    its command and args as one command line (``$(VAR)`` is Kubernetes' own expansion)."""
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if not command:
        image = str(container.get("image", "")).split(":")[0].removeprefix("docker.io/")
        command = ENTRYPOINTS.get(image, [])
    if not command and not args:
        return None
    if len(command) >= 2 and command[0].rsplit("/", 1)[-1] in ("sh", "bash") and command[1] == "-c":
        if len(command) > 2:
            return command[2], "command"
        if args:
            return args[0], "args"
    line = " ".join(shlex.quote(re.sub(r"\$\((\w+)\)", r"${\1}", word)) if "$(" in word else shlex.quote(word)
                    for word in command + args)
    line = re.sub(r"'([^']*\$\{\w+\}[^']*)'", r'"\1"', line)      # let ${VAR} expand inside the quotes
    return line, "args" if args else "command"


def read_kubernetes(document: Document) -> list[CloudTask]:
    """One task per workload of the manifest (its Services, ConfigMaps, ... left out)."""
    from vramlint.readers.cloud import CloudTask, Script
    from vramlint.readers.shell import Word
    tasks = []
    for index, obj in _objects(document.data):
        prefix = "$" if index is None else f"$[{index}]"
        kind = obj.get("kind")
        name = _dig(obj, "metadata", "name") or kind
        where = document.locate(f"{prefix}.kind")
        if kind in UNREAD_KINDS:
            task = CloudTask(f"Kubernetes {kind} {name}")
            task.unread = f"{kind} runs its job from Python (Ray Serve / Ray Train): not read yet"
            task.line = where.line
            tasks.append(task)
            continue
        if kind not in WORKLOADS:
            continue
        for path, pod, pods in _pods(obj):
            containers = pod.get("containers") if isinstance(pod.get("containers"), list) else []
            main = next((c for c in containers if isinstance(c, dict) and _gpus(c) is not None), None) or next(
                (c for c in containers if isinstance(c, dict)), None)
            if main is None:
                continue
            at = containers.index(main)
            task = CloudTask(f"Kubernetes {kind} {name}")
            task.line = where.line
            count = _gpus(main)
            limit = document.locate(f"{prefix}.{path}.containers[{at}].resources.limits")
            if count is not None:
                task.per_node = Word(str(count) if str(count).isdigit() else None, limit.line, limit.column,
                                     unknown="" if str(count).isdigit() else f"nvidia.com/gpu {count}")
            gpu = _gpu_type(pod)
            if gpu:
                selector = document.locate(f"{prefix}.{path}.nodeSelector")
                task.gpu = Word(gpu, selector.line, selector.column)
            task.nodes = Word(str(pods), where.line, where.column)
            for i, item in enumerate(main.get("env") or []):
                if isinstance(item, dict) and item.get("name"):
                    spot = document.locate(f"{prefix}.{path}.containers[{at}].env[{i}]")
                    value = item.get("value")
                    task.variables[str(item["name"])] = Word(
                        None if value is None else str(value), spot.line, spot.column,
                        unknown="" if value is not None else f"${item['name']} (from a secret or the cluster)")
            found = _script(main)
            if found is not None:
                text, key = found
                spot = document.locate(f"{prefix}.{path}.containers[{at}].{key}")
                task.scripts.append(Script(text, spot.line))
            tasks.append(task)
    return tasks


def _gpus(container: dict) -> object:
    limits = _dig(container, "resources", "limits")
    return limits.get("nvidia.com/gpu") if isinstance(limits, dict) else None
