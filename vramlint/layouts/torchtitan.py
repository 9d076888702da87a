"""A torchtitan job's layout → the Plan its runtime reads (memory/runtimes/torchtitan), and the
layouts torchtitan refuses at start-up, in its words.

The degrees resolve as torchtitan 0.2.2's ``ParallelDims._validate`` resolves them
(torchtitan/distributed/parallel_dims.py:35-59): ``data_parallel_shard_degree = -1`` takes the
ranks the others leave, and the product must be the world size; FSDP2 shards over dp_shard x cp
(the ``fsdp`` mesh, :197). The pipeline's split and micro-batches are
torchtitan/distributed/pipeline_parallel.py's (:59-120, :186-213).
"""

from __future__ import annotations

from vramlint.hardware import Cluster
from vramlint.layouts import Refusal, whole
from vramlint.models.shape import ModelShape
from vramlint.plan import Flags, Origin, Parallelism, Plan
from vramlint.readers.recipe import Recipe
from vramlint.readers.torchtitan import AC_MODES, FLAVORS, QWEN3, SCHEDULES, SINGLE_STAGE, V_SHAPED, VERSION, Layout


def degrees(layout: Layout, world: int) -> dict[str, int]:
    """The mesh's degrees, dp_shard's -1 resolved as ``ParallelDims._validate`` does."""
    out = {name: whole(getattr(layout, name)) for name in ("dp_replicate", "context", "tensor", "pipeline")}
    rest = out["dp_replicate"] * out["context"] * out["tensor"] * out["pipeline"]
    shard = whole(layout.dp_shard, -1)
    out["dp_shard"] = world // rest if shard < 0 else shard
    return out


def virtual_stages(layout: Layout, num_layers: int) -> int:
    """The stages ``pipeline_parallel_layers_per_stage`` splits the layers, the embedding and the
    head into, ceil((L + 2) / per) (pipeline_parallel.py:71-76); 0 where the split is not stated."""
    per = whole(layout.layers_per_stage, 0)
    return -(-(num_layers + 2) // per) if per else 0


def stages_per_rank(layout: Layout, num_layers: int, pp: int) -> int:
    """Stages each pipeline rank runs: 1 for 1F1B and GPipe, 2 for the multi-stage schedules
    unless ``pipeline_parallel_layers_per_stage`` sets the split (pipeline_parallel.py:59-115)."""
    stages = virtual_stages(layout, num_layers)
    if stages:
        return max(1, stages // pp)
    return 1 if str(layout.schedule.value) in SINGLE_STAGE else 2


# The whole numbers a layout states, and the least each takes (-1: dp_shard's and
# global_batch_size's "derive it"); JobConfig types them int (job_config.py), tyro refuses the rest.
COUNTS = (("dp_shard", 1, True), ("dp_replicate", 1, False), ("tensor", 1, False), ("pipeline", 1, False),
          ("context", 1, False), ("pp_microbatch", 1, False), ("local_batch", 1, False), ("global_batch", 1, True))


def _wrong_types(layout: Layout) -> list[Refusal]:
    out = []
    for name, least, derived in COUNTS:
        fact = getattr(layout, name)
        value = fact.value
        if isinstance(value, bool) or not isinstance(value, int) or (value < least and not (derived and value == -1)):
            out.append(Refusal(fact, f"{fact.location.json_path.removeprefix('$.') if fact.location else name}: "
                                     f"{value!r} is not a whole number of {least} or more"
                                     + (" (or -1)" if derived else ""), "no memory estimate until it is", True))
    return out


def _mesh(layout: Layout, recipe: Recipe, model: ModelShape, world: int) -> list[Refusal]:
    """ParallelDims' product, the sequence's divisor, the heads TP splits."""
    d = degrees(layout, world)
    product = d["dp_replicate"] * d["dp_shard"] * d["context"] * d["tensor"] * d["pipeline"]
    if d["dp_shard"] < 1 or product != world:
        return [Refusal(layout.dp_shard if layout.dp_shard.from_file else layout.tensor,
                        f"Invalid parallel dims: dp_replicate({d['dp_replicate']}) * dp_shard({d['dp_shard']}) * "
                        f"cp({d['context']}) * tp({d['tensor']}) * pp({d['pipeline']}) != WORLD_SIZE({world}) "
                        "(parallel_dims.py:53)", "make the degrees multiply to the GPU count (dp_shard -1 takes "
                        "what the others leave)")]
    out = []
    seq, divisor = whole(recipe.seq_len, 0), d["tensor"] * d["context"] * 2
    if seq and seq % divisor:
        out.append(Refusal(recipe.seq_len, f"Sequence length {seq} must be divisible by the product of TP degree "
                                           f"({d['tensor']}) and 2 * CP degree ({d['context']}). "
                                           "(llama3/infra/parallelize.py:69)", f"a seq_len that is a multiple of "
                                                                               f"{divisor}"))
    heads = model.layers[0].attention
    for name, count in (("n_heads", heads.num_heads), ("n_kv_heads", heads.num_kv_heads)):
        if d["tensor"] > 1 and count % d["tensor"]:
            out.append(Refusal(layout.tensor, f"{name} ({count}) is not divisible by the TP degree ({d['tensor']}): "
                                              "ColwiseParallel cannot shard its heads evenly",
                               "a tensor_parallel_degree that divides the heads"))
    batch = d["dp_replicate"] * d["dp_shard"]
    wanted, local = whole(layout.global_batch, -1), whole(layout.local_batch)
    if wanted > 0 and wanted % (local * batch):
        out.append(Refusal(layout.global_batch, f"global batch size must be multiple of local batch size times "
                                                f"data-parallel degree ({wanted} % ({local} * {batch}) != 0) "
                                                "(train.py:202-208)", f"a multiple of {local * batch}"))
    return out


def _checkpointing_refused(layout: Layout) -> list[Refusal]:
    """activation_checkpoint.py:167-183's ValueErrors (memory_budget and none are handled before)."""
    mode, option = str(layout.checkpointing.value), str(layout.selective_option.value)
    if mode not in AC_MODES:
        return [Refusal(layout.checkpointing, f"Invalid AC mode: {mode}. Valid modes: ('full', 'selective')",
                        'mode = "selective" or "full"')]
    if mode == "selective" and option != "op" and not option.isdigit():
        return [Refusal(layout.selective_option, f"Invalid selective AC option: {option}. Valid options: 'op' or a "
                                                 "positive int representing layer frequency",
                        'selective_ac_option = "op"')]
    return []


def _stage_split(layout: Layout, model: ModelShape, pp: int, schedule: str) -> list[Refusal]:
    """``pipeline_parallel_layers_per_stage``'s stages against the schedule (pipeline_parallel.py, 0.2.2
    :71-110 and 0.3.0 :214-257: the stages a multiple of the ranks, one a rank for a single-stage
    schedule, two or more for a looped one; the V-shaped ones take exactly two, :459-466)."""
    stages, per = virtual_stages(layout, model.num_layers), whole(layout.layers_per_stage, 0)
    if not stages:
        return []
    on = layout.layers_per_stage
    said = (f"Model has {model.num_layers} layers with pipeline_parallel_layers_per_stage={per}, resulting in "
            f"num_virtual_stages={stages} across {pp} PP ranks")
    if stages % pp:
        return [Refusal(on, f"Number of virtual stages ({stages}) must be divisible by pipeline parallel size ({pp}). "
                            f"{said}", f"a pipeline_parallel_layers_per_stage giving a multiple of {pp} stages")]
    rank = stages // pp
    if schedule in SINGLE_STAGE and rank != 1:
        return [Refusal(on, f"Single stage schedule requires exactly 1 stage per rank, but got {rank} stages per rank. "
                            f"{said}", f"pipeline_parallel_layers_per_stage {model.num_layers // pp} or higher")]
    if schedule not in SINGLE_STAGE and rank < 2:
        return [Refusal(on, f"Multi-stage schedule requires at least 2 stages per rank, but got {rank} stages per "
                            f"rank. {said}", "a smaller pipeline_parallel_layers_per_stage")]
    if schedule in V_SHAPED and rank != 2:
        return [Refusal(on, f"v schedules assume 2 stages per rank, got {rank} (pipeline_parallel.py:464)",
                        f"pipeline_parallel_layers_per_stage {-(-(model.num_layers + 2) // (2 * pp))}")]
    return []


def _pipeline(layout: Layout, model: ModelShape, pp: int) -> list[Refusal]:
    """The schedule, the micro-batches and the stages the split can make (pipeline_parallel.py)."""
    schedule = str(layout.schedule.value)
    if schedule not in SCHEDULES:
        return [Refusal(layout.schedule, f"Unknown pipeline schedule {schedule!r} (torch.distributed.pipelining "
                                         f"knows {', '.join(SCHEDULES)})", "one of those")]
    split = _stage_split(layout, model, pp, schedule)
    if split:
        return split
    stages, effective = pp * stages_per_rank(layout, model.num_layers, pp), model.num_layers + 2
    if stages > effective:
        return [Refusal(layout.pipeline, f"Number of stages ({stages}) cannot be greater than effective layers "
                                         f"({effective}) (pipeline_parallel.py:269)", "fewer pipeline stages")]
    local, micro = whole(layout.local_batch), whole(layout.pp_microbatch)
    if local % micro:
        return [Refusal(layout.pp_microbatch, f"Batch size {local} must be divisible by microbatch_size {micro}. "
                                              "(pipeline_parallel.py:189)",
                        "a pipeline_parallel_microbatch_size that divides local_batch_size")]
    if local // micro < stages:
        return [Refusal(layout.pp_microbatch, f"Number of microbatches ({local // micro}) is less than the total "
                                              f"number of stages ({stages}) which may result in a bubble in the "
                                              "pipeline. (pipeline_parallel.py:197)",
                        f"local_batch_size {stages * micro} or more")]
    return []


def _release_refused(layout: Layout, model: ModelShape, pp: int, seq: int) -> list[Refusal]:
    """0.3.0's own refusals: ChunkedLossWrapper's chunks of the rank's sequence (components/loss.py
    :668-673); of a pipeline, Trainer.Config._validate_cuda_graphs (trainer.py:179-187, at parse time)
    and Decoder's weight tying (models/common/decoder.py:139-142)."""
    if layout.release == VERSION:
        return []
    chunks = layout.loss_chunks.value
    if layout.loss_chunks.from_file and (isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1):
        return [Refusal(layout.loss_chunks, f"loss.num_chunks: {chunks!r} is not a whole number of 1 or more",
                        "--loss.num_chunks 8 (ChunkedLossWrapper's default)")]
    if chunks and seq % chunks:
        return [Refusal(layout.loss_chunks, "ChunkedLossWrapper sequence length must be divisible by num_chunks "
                                            f"({seq} % {chunks}) (components/loss.py:671)",
                        "a --loss.num_chunks that divides each rank's sequence")]
    if pp < 2:
        return []
    if layout.cuda_graphs.value:
        return [Refusal(layout.pipeline, "CUDA graphs do not support pipeline parallelism yet. Set "
                                         "--training.disable_cuda_graphs. (trainer.py:184)",
                        "--training.disable_cuda_graphs")]
    if model.head_params == 0:
        return [Refusal(layout.pipeline, "Weight tying is not supported with Pipeline Parallel. "
                                         "(models/common/decoder.py:140)", "a config of an untied model, or no "
                                                                           "pipeline")]
    return []


def refusals(layout: Layout, recipe: Recipe, model: ModelShape, world: int) -> list[Refusal]:
    """What torchtitan refuses before its first step, each with the message it raises."""
    wrong = _wrong_types(layout)
    if wrong:
        return wrong
    d = degrees(layout, world)
    pp, seq = d["pipeline"], whole(recipe.seq_len, 0) // max(1, d["context"])
    out = _release_refused(layout, model, pp, seq) + _mesh(layout, recipe, model, world) + \
        _checkpointing_refused(layout)
    return out + (_pipeline(layout, model, pp) if pp > 1 and not out else [])


def unmodelled(recipe: Recipe) -> tuple[str, str]:
    """Why no model stands behind the job (a model or flavor vramlint has no shapes for, or what the
    reader says of a 0.3.0 config), and the way on."""
    if recipe.model_hint:
        return f"{recipe.model.value}: {recipe.model_hint}", "check a config function torchtitan ships for a " \
                                                            "dense llama3 or qwen3 model, or give --model"
    return (f"{recipe.model.value}: not a model vramlint knows torchtitan's shapes for (llama3 flavors "
            f"{', '.join(FLAVORS)}; qwen3 {', '.join(QWEN3)})", "give --model with the Hugging Face model of the "
                                                                 "same shape")


def _checkpointing(layout: Layout) -> str:
    """The policy in the runtime's words (``refusals`` has turned away any other)."""
    mode, option = str(layout.checkpointing.value), str(layout.selective_option.value)
    if mode == "selective":
        return "op" if option == "op" else f"every:{option}"
    return mode


def _release(layout: Layout, model: ModelShape, micro: int) -> dict:
    """What the model code of the job's torchtitan builds beyond 0.2.2's llama3. qwen3 normalizes
    each head's q and k; its 0.2.2 RoPE saves the cos and sin rows cast to bf16, one [seq, head_dim]
    each a sequence position (shared by the batch's rows). 0.3.0 (readers/torchtitan_registry.py):
    the loss in chunks with the output projection inside, CUDA graphs, one fused QKV projection whose
    output per-op selective checkpointing saves, TP collectives that are c10d calls it does not save
    (spmd_types), tied embeddings' one unit, and one RoPE cache per block (4 B x head_dim a position
    for llama3's complex64, 8 B for qwen3's cos + sin), whose rows the positions gather per token."""
    qwen, hd = model.model_type == "qwen3", model.layers[0].attention.head_dim
    if layout.release == VERSION:
        return {"qk_norm": True, "rope_saved": -(-4 * hd // max(1, micro))} if qwen else {}
    rope = (8 if qwen else 4) * hd
    return {"loss_chunks": whole(layout.loss_chunks, 0), "cuda_graphs": bool(layout.cuda_graphs.value),
            "fused_qkv": True, "saved_collectives": False, "rope_cache": rope, "rope_saved": rope,
            "qk_norm": qwen, "tied_unit": model.head_params == 0}


def plan(recipe: Recipe, job: dict, flags: Flags, model: ModelShape, cluster: Cluster,
                    origins: dict, notes: list[str]) -> Plan:
    """The Plan of a torchtitan job: FSDP2 (fp32 shards, bf16 compute, fp32 reduce) over dp_shard x
    cp, the TP share of every weight, the pipeline stage's layers, the AC policy."""
    layout: Layout = recipe.layout.value
    d = degrees(layout, cluster.world_size)
    pp = d["pipeline"]
    micro = job["micro_batch"]
    local = whole(layout.local_batch, 8)
    microbatches = max(1, local // micro) if pp > 1 else 1
    per_rank = stages_per_rank(layout, model.num_layers, pp) if pp > 1 else 1
    schedule = str(layout.schedule.value)
    mode = _checkpointing(layout)
    reshard = str(layout.reshard.value)
    resharded = reshard == "always" or (reshard == "default" and pp == 1)
    par = Parallelism(shard=d["dp_shard"] * d["context"], replicate=d["dp_replicate"], context=d["context"],
                      pipeline=pp, schedule=schedule, microbatches=microbatches, stages_per_rank=per_rank,
                      checkpointing=mode, compiled_loss=bool(layout.compile.value) and bool(layout.compiled_loss.value),
                      reshard_after_forward=resharded,
                      loss_parallel=bool(layout.loss_parallel.value), **_release(layout, model, micro))
    for name, fact in (("tensor_parallel", layout.tensor), ("pipeline_parallel", layout.pipeline),
                       ("shard_degree", layout.dp_shard), ("grad_accum", layout.global_batch)):
        origins[name] = Origin("file", fact.location) if fact.from_file else Origin("default", text=fact.default)
    notes.append(f"{layout.release}: FSDP2 shards fp32 parameters, gradients and AdamW's states over dp_shard x cp = "
                 f"{par.shard} GPUs" + (f", replicated {par.replicate} times" if par.replicate > 1 else "")
                 + "; blocks compute in bf16 (MixedPrecisionPolicy), gradients reduce in fp32")
    if pp > 1:
        notes.append(f"pipeline: {pp} ranks x {per_rank} stage(s) each, schedule {schedule}, {microbatches} "
                     f"micro-batches of {micro} row(s) a step"
                     + ("; FSDP keeps each stage's blocks unsharded across them (fsdp_reshard_after_forward "
                        "default: not resharded under PP)" if not resharded else ""))
    notes.append({"op": "activation checkpointing: selective, per op (the outputs of every other matmul and of "
                        "attention are saved)", "full": "activation checkpointing: full (each block keeps its input)",
                  "none": "activation checkpointing: none"}.get(
        mode, f"activation checkpointing: selective per layer, one block in every {mode.partition(':')[2]} fully "
              "checkpointed, the others keeping everything"
        if mode.startswith("every") else f"activation checkpointing: {mode}"))
    weights = str(job["weights_dtype"]) if job["weights_dtype"] in ("float32", "bfloat16") else "float32"
    workload = {k: v for k, v in flags.workload.items()
                if k not in ("weights_dtype", "tensor_parallel", "sync_each_batch")}
    workload["optimizer_impl"] = "fused"
    wanted = whole(layout.global_batch, -1)
    accum = max(1, wanted // (local * d["dp_replicate"] * d["dp_shard"])) if wanted > 0 else 1
    return Plan(model=model, cluster=cluster, precision=flags.precision or "bf16", runtime="torchtitan",
                weights_dtype=weights, micro_batch=micro, seq_len=job["seq_len"],
                grad_accum=accum, origins=dict(origins), grad_checkpointing=mode != "none",
                fsdp_strategy="FULL_SHARD", fsdp_version=2, shard_degree=par.shard, sync_each_batch=True,
                tensor_parallel=d["tensor"], pipeline_parallel=pp, parallelism=par,
                offload_param="cpu" if recipe.fsdp and recipe.fsdp.offload.value else "none",
                **workload)


__all__ = ["degrees", "plan", "refusals", "unmodelled"]
