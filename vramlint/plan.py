"""The Plan: the job that will run, whatever file it came from, and where each value came from.

A Plan is filled from a config file first, then from command-line flags for what the file leaves
open (``"auto"`` or absent), then from defaults; ``origins`` remembers which, so a finding can
point at the file line that set a value or say that a default was assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from vramlint.documents import Location
from vramlint.errors import UnplannableError, UsageError
from vramlint.hardware import Cluster
from vramlint.models.shape import ModelShape
from vramlint.models.tp_plans import autotp_split, hf_split
from vramlint.readers.deepspeed import AUTO, DeepSpeedConfig, Fact

PRECISIONS = ("bf16", "fp16", "fp32")
# What torchtitan's tensor parallelism splits (torchtitan 0.2.2 models/llama3/infra/parallelize.py
# apply_tp: tok_embeddings RowwiseParallel, output ColwiseParallel, every attention and FFN linear);
# Megatron's is the same (VocabParallelEmbedding, Column/RowParallelLinear, the output ColumnParallelLinear)
OWN_CODE_SPLIT = frozenset({"attention", "mlp", "experts", "embedding", "head"})
OPTIMIZERS = ("adamw", "adamw-8bit", "sgd", "adafactor")     # the optimizer states memory/parts/states.py prices
PURE = {"bfloat16": "bf16", "float16": "fp16"}      # 16-bit weights -> the compute dtype without autocast
OFFLOAD_DEVICES = ("none", "cpu", "nvme")


def fsdp_weights_dtype(precision: str, load_dtype: str | None, adapters: bool, upcast: bool = True) -> str:
    """The dtype of FSDP's trained shards: Accelerate upcasts parameters that need grads to fp32
    under mixed precision (accelerate 1.15 accelerator.py:1997-2037 for FSDP1, utils/fsdp_utils.py:
    816-820 for FSDP2); a LoRA model's frozen base keeps its load dtype; without mixed precision, or
    where the framework does not upcast (torchtune, axolotl's FSDP2), the shards are as loaded."""
    if adapters:
        return load_dtype or "bfloat16"
    if upcast and precision != "fp32":
        return "float32"
    return load_dtype or "float32"


def fsdp_adapter_dtype(precision: str, adapter_dtype: str, upcast: bool = True) -> str:
    """LoRA adapters under FSDP: what needs grads Accelerate upcasts to fp32 under mixed precision
    (as ``fsdp_weights_dtype``), whatever dtype PEFT left them in; torchtune keeps its own."""
    return "float32" if upcast and precision != "fp32" else adapter_dtype


@dataclass(frozen=True)
class Origin:
    """Where a plan value came from: a file location, a flag, or a default."""

    kind: str                      # "file", "flag" or "default"
    location: Location | None = None
    text: str = ""

    def __str__(self) -> str:
        if self.location:
            return str(self.location)
        return self.text or self.kind


def flag_text(name: str) -> str:
    """The command-line flag that states a setting: its name dashed, the precision's ``--mixed-precision``."""
    return "--mixed-precision" if name in ("precision", "mixed_precision") else "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Flags:
    """The values that fill in what a config file leaves open (``"auto"`` or absent); None means
    not given. They come from the command line, or from the recipe that runs the file, and
    ``origins`` says which (a value without an origin is a command-line flag's)."""

    micro_batch: int | None = None
    seq_len: int | None = None
    grad_accum: int | None = None
    precision: str | None = None
    zero_stage: int | None = None
    grad_checkpointing: bool = False
    workload: dict = field(default_factory=dict)    # Plan fields no config file states (optimizer, LoRA...)
    origins: dict = field(default_factory=dict)     # field -> Origin, where not the command line
    stated: frozenset = frozenset()                 # fields the command line (or a per-file override) states:
                                                    # they win over the file, the others only fill its "auto"s

    def origin(self, name: str) -> Origin:
        return self.origins.get(name) or Origin("flag", text=flag_text(name))

    def wins(self, name: str) -> bool:
        return name in self.stated and getattr(self, name) is not None


@dataclass(frozen=True)
class Resident:
    """A frozen model an RL job keeps on the GPUs that train (OpenRLHF's reference and reward
    model, DeepSpeed eval engines at the actor's ZeRO-3, else stage 0: memory/rl.py): 16-bit
    weights, on the host where their ZeRO-3 offload puts them."""

    name: str                      # reference, reward model
    params: int
    offloaded: bool = False        # --ref.offload / --reward.offload under ZeRO-3: on the host
    follows_actor: bool = False    # its offload is the actor's parameters' (verl's ref.megatron.param_offload
                                   # interpolates actor.megatron.param_offload unless the job sets it)


@dataclass(frozen=True)
class Rollout:
    """An online-RL step's other phases on the same GPUs (memory/rl.py): the rollout engine that
    generates between updates, what the framework moves to the host meanwhile, the critic trained
    beside the actor, and the log-prob forward's micro-batch. The update itself is the Plan's step."""

    engine: str                    # vllm or sglang: the rollout engine colocated on every GPU
    share: float                   # its gpu_memory_utilization / mem_fraction_static of each GPU
    tensor_parallel: int = 1       # the engine's TP: its weights are 2 B x P / TP on each GPU
    frees_between: bool = True     # the engine sleeps (weights and KV cache freed) outside the rollout
    params_offloaded: bool = False     # the actor's shards on the host outside its update and log-prob
    optimizer_offloaded: bool = False  # the actor's optimizer states on the host outside its update
    critic_params: int = 0         # a critic (PPO's GAE) trained beside the actor: its parameters
    critic_params_offloaded: bool = False
    critic_optimizer_offloaded: bool = False
    logprob_tokens: int = 0        # tokens per GPU in one log-prob (no-grad) micro-batch
    logprob_row: int = 0           # tokens of one of its rows (prompt + response); 0: a token budget (dynamic)
    dynamic: bool = False          # the update's micro-batch is a token budget (one packed row, use_dynamic_bsz)
    logprob_setting: str = "logprob_micro"   # the setting a hint changes for it (vocabulary.WORDS): whose micro-batch
    scaled_logits: bool = False    # a sampling temperature other than 1: the logits divided, a second copy
    framework: str = "verl"        # whose phases: verl (FSDP hybrid engine) or openrlhf (Ray actors, DeepSpeed)
    engine_here: bool = True       # the engine shares these GPUs (OpenRLHF without colocate_all: GPUs of its own)
    residents: tuple[Resident, ...] = ()   # frozen models resting on these GPUs beside the actor
    processes: int = 1             # trainer processes on each GPU (OpenRLHF: a Ray actor per colocated model)
    engine_process: bool = False   # the engine's worker is a process of its own on each GPU (a context of its own)
    logit_bytes: int = 2           # bytes per logit at the log-prob forward's peak (OpenRLHF: bf16 + its fp32 copy, 6)
    one_switch: bool = False       # one switch offloads the actor's and the critic's states (--ds.enable_sleep)
    trains: bool = True            # False: a group that trains nothing (OpenRLHF's reference or reward model on GPUs
    #                                of their own): its resting model and its no-grad forward (memory/rl.frozen)
    offloaded: bool = False        # such a group's model on the host (its --ref.offload / --reward.offload, ZeRO-3)
    offload_setting: str = ""      # the setting that puts it there (vocabulary.WORDS): ref_offload, reward_offload
    prompt_tokens: int = 0         # the prompt and response caps a row is made of (verl's data.max_prompt_length,
    response_tokens: int = 0       # data.max_response_length), for the response-length hint; 0: not rows of them
    seq_split: int = 1             # Ulysses ranks a row is split over (each keeps its share of the row's tokens)

    @property
    def grads_offloaded(self) -> bool:
        """verl's Megatron engine moves its gradient buffer with the parameters (``grad=param_offload``,
        workers/engine/base.py ``BaseEngineCtx``), and its log-prob forward (eval mode) brings back the
        parameters alone."""
        return self.params_offloaded


@dataclass(frozen=True)
class Parallelism:
    """The mesh a pretraining framework builds beyond data parallelism (torchtitan's
    ``ParallelDims``; memory/runtimes/torchtitan): FSDP2 shards over ``shard`` ranks (dp_shard x cp)
    and replicates ``replicate`` times, each sequence is split over ``context`` ranks, the layers
    over ``pipeline`` stages run by ``schedule`` with ``microbatches`` micro-batches a step. The
    tensor-parallel degree is the Plan's own."""

    shard: int = 1
    replicate: int = 1
    context: int = 1
    pipeline: int = 1
    schedule: str = "1F1B"
    microbatches: int = 1          # pipeline micro-batches per step (local batch / micro-batch rows)
    stages_per_rank: int = 1       # 2 and more: a looped or V-shaped schedule's virtual stages
    checkpointing: str = "op"      # full, op (per-op selective), every:N (selective, every n-th block), none
    compiled_loss: bool = False    # torch.compile reaches the loss (torchtitan compile.components)
    loss_parallel: bool = False    # under TP the loss runs over each rank's vocabulary shard (torch loss_parallel;
                                   # torchtitan's unless disable_loss_parallel)
    reshard_after_forward: bool = True     # FSDP2 reshards a block after its forward (torchtitan: not under PP)
    # torchtitan 0.3.0 (layouts/torchtitan.py _release): ChunkedLossWrapper's chunks (0: the whole logits), CUDA
    # graphs, the fused QKV projection, whether per-op checkpointing saves the TP reduce-scatters (DTensor's
    # funcol: yes; spmd_types' c10d calls: no), the bytes a block's RoPE cache holds per position
    loss_chunks: int = 0
    cuda_graphs: bool = False
    fused_qkv: bool = False
    saved_collectives: bool = True
    rope_cache: int = 0
    rope_saved: int = 0                    # bytes a token the block's RoPE saves (the cache rows it uses)
    qk_norm: bool = False                  # torchtitan's qwen3: RMSNorm over each head's q and k
    tied_unit: bool = False                # torchtitan 0.3.0 tied embeddings: one unit, unsharded through forward
    # Megatron-LM (memory/runtimes/megatron): checkpointing is "none", "selective:<modules>",
    # "uniform:N" or "block:N" (full recompute); ``shard`` is the distributed optimizer's dp x cp group
    sequence_parallel: bool = True         # what a block receives is split over the TP ranks (torchtitan: always)
    distributed_optimizer: bool = False    # Megatron's: fp32 main parameters and Adam's states over ``shard``
    grad_bytes: int = 4                    # Megatron's DDP gradient buffer element (fp32 accumulation under bf16)
    first_layers: int = 0                  # layers of the first / last pipeline stage, where stated (uneven split)
    last_layers: int = 0
    slots: tuple[bool, bool] = (False, False)   # the embedding / the loss counted as a layer in the pipeline split
    stage_layers: tuple[int, ...] = ()     # layers of each stage where a layout states them (Megatron's layout string)
    dropout: bool = False                  # hidden dropout on: a 1-byte mask after attention and after the MLP
    # NeMo 1.x over Megatron-core (readers/nemo.py): Apex's DistributedFusedAdam keeps int16 remainders of
    # the 16-bit parameters for main copies and reduce-scatters gradients into shards of their own; torch
    # DDP without gradient_as_bucket_view keeps its buckets beside the gradients; fp32 parameters under
    # autocast (megatron_amp_O2 off) are cast to 16 bits each forward: "cache" (torch.autocast's cache,
    # freed when the forward's region exits) or "saved" (Transformer Engine saves its cast for backward)
    apex_adam: bool = False
    bucket_copy: bool = False
    autocast: str = "none"
    # Megatron-core's optimizer_cpu_offload (HybridDeviceOptimizer): this share of the optimizer's shard
    # on the host, Adam's moments and, under the precision-aware optimizer, the fp32 main copies too
    host_fraction: float = 0.0
    host_main: bool = False
    # Megatron-FSDP (memory/runtimes/megatron/fsdp.py): its sharding strategy ("" off), whether its units'
    # gathered weights and gradients live in two persistent buffers, its main parameters' bytes (0: none apart)
    fsdp: str = ""
    fsdp_double_buffer: bool = False
    fused_loss: bool = False               # Megatron's native fused cross-entropy (--cross-entropy-loss-fusion)
    deferred_wgrad: int = 0                # micro-batches whose output-layer weight gradient waits for the flush
    fsdp_main_bytes: int = 4
    scores: int = 0                        # bytes a score the unfused attention keeps (softmax, its dropout
                                           # mask and output: 5; 2 without attention dropout; fused: 0)
    # Megatron's MoE layers: the routed experts split over ``expert`` x ``expert_tensor`` ranks, their
    # optimizer states over the expert data-parallel group ``expert_shard``; the tokens a rank's experts
    # receive (balanced routing, or ``capacity`` x that where a capacity factor caps them) reach them
    # through the ``dispatcher``'s buffers; ``aux_loss``: the router keeps its full softmax
    expert: int = 1
    expert_tensor: int = 0                 # 0: the TP size (Megatron's default, A:569-570)
    expert_shard: int = 1
    dispatcher: str = "allgather"
    capacity: float = 1.0
    aux_loss: bool = False
    expert_act: int = 3                    # widths of one expert's FFN a routed token keeps through the weighted
                                           # activation (activations.py ``WEIGHTED``)

    def expert_tp(self, tp: int) -> int:
        """The routed experts' TP size: the job's, else the TP size ``tp`` (A:569-570)."""
        return self.expert_tensor or tp

    def expert_grid(self, tp: int, pp: int | None = None) -> int:
        """GPUs one copy of the routed experts spans, ETP x EP x PP (``pp`` the job's pipeline size
        unless another is weighed): Megatron's expert_tensor_model_pipeline_parallel size,
        parallel_state.py:874-879."""
        return self.expert_tp(tp) * self.expert * (self.pipeline if pp is None else pp)


@dataclass(frozen=True)
class Plan:
    """One training step or one inference forward, as the memory model needs to know it."""

    model: ModelShape
    cluster: Cluster
    precision: str                 # compute dtype: bf16, fp16 or fp32
    zero_stage: int = 0
    offload_optimizer: str = "none"
    offload_param: str = "none"
    micro_batch: int = 1
    seq_len: int = 2048
    grad_checkpointing: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    mode: str = "train"            # "train" or "infer"
    runtime: str = "deepspeed"     # "deepspeed", "torch" (single GPU / DDP) or "fsdp"
    weights_dtype: str | None = None   # torch: dtype the parameters live in (float32 + autocast); FSDP: the shards'
    optimizer: str = "adamw"       # adamw (foreach), adamw-8bit, sgd, adafactor
    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ("all-linear",)
    lora_dropout: float = 0.0      # PEFT's lora_dropout: a kept mask per adapted linear's input when > 0
    dora: bool = False             # PEFT use_dora: a magnitude vector per adapted linear, its weight norm each forward
    # whose model code runs the step: transformers' (with PEFT's LoRA), or a framework's own (``Recipe.model_code``:
    # LitGPT's LoRA keeps its zero-padded B output, memory/parts/activations.py; transformers' releases do not apply)
    model_code: str = "transformers"
    load_in_4bit: bool = False
    adapter_dtype: str = "float32"  # LoRA adapters (and their grads, Adam moments): PEFT upcasts to fp32 by default
    load_in_8bit: bool = False     # LLM.int8 base (bitsandbytes Linear8bitLt) under LoRA, or for inference
    attn: str = "auto"             # sdpa / flash_attention_2 (no s^2 term) or eager; auto: the type's default
    fsdp_strategy: str = "FULL_SHARD"          # FSDP: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD(_ZERO2)
    fsdp_version: int = 1                      # FSDP1 (flat parameters; Accelerate's default) or FSDP2 (fully_shard)
    source: str = "deepspeed"                  # the job's description: deepspeed, accelerate, flags, or a recipe framework
    sub_group_size: int = 1_000_000_000        # DeepSpeed ZeRO-3 optimizer sub-group (elements)
    reduce_bucket_size: int = 500_000_000      # DeepSpeed ZeRO-1/2/3 gradient bucket (elements)
    overlap_comm: bool = False                 # DeepSpeed ZeRO-1/2: a second IPG bucket (DeepSpeed's default off below stage 3)
    max_live_parameters: int = 1_000_000_000   # DeepSpeed ZeRO-3 stage3_max_live_parameters
    max_reuse_distance: int = 1_000_000_000    # DeepSpeed ZeRO-3 stage3_max_reuse_distance (elements)
    prefetch_bucket_size: int = 50_000_000     # DeepSpeed ZeRO-3 stage3_prefetch_bucket_size (elements)
    param_persistence_threshold: int = 100_000  # DeepSpeed ZeRO-3: smaller parameters stay gathered
    zero_init: bool = True         # ZeRO-3 model built under deepspeed.zero.Init (HF Trainer, Accelerate), not on one GPU
    shard_degree: int = 0          # > 0: the ranks FSDP shards over, as the file says (Accelerate: dp_shard x cp)
    grad_accum: int = 1            # micro-batches per optimizer step: gradients carried from one to the next
    # DeepSpeed's train_batch_size where the file states a number: DeepSpeed asserts it equals micro-batch x
    # gradient accumulation x the batch world (runtime/config.py _batch_assertion), so only a micro-batch that
    # divides it over those ranks starts (0: not stated, "auto", or no DeepSpeed)
    global_batch: int = 0
    batch_split: int = 1           # DeepSpeed's sequence_parallel_size: the batch world is world / (TP x it)
    quantized_experts: bool = False  # bitsandbytes quantizes the routed experts (nn.Linear each, transformers < 5)
    sdpa_repeat_kv: bool = False   # SDPA keeps repeat_kv's full-head k and v (transformers before 4.54, GQA)
    attention_mask: bool = True    # the step passes an attention_mask (every collator gives one) or keeps a cache
    sdpa_causal_mask: bool = False  # SDPA given a built b x s x s causal mask (transformers 4.53.1-4.57, no mask passed)
    bnb_keeps_input: bool = False  # bitsandbytes' MatMul4Bit keeps each 4-bit linear's input (up to 0.43.1)
    prompt_logits: bool = False    # inference: logits for every prompt position, fp32 (transformers <= 4.44)
    loss: str = "full"             # the loss head (memory/parts/loss.py): full, chunked(-compiled), liger, cce, trl, none
    optimizer_impl: str = "foreach"    # torch AdamW: foreach (a temporary copy in the step) or fused (none)
    optimizer_in_bwd: bool = False     # each parameter stepped as its gradient is made (torchtune optimizer_in_bwd)
    paged_optimizer: bool = False      # bitsandbytes paged states in unified memory, evicted to the host under pressure
    activation_offload: bool = False   # checkpointed layer inputs copied to pinned host memory (torchtune)
    rows_per_example: int = 1      # rows each example puts in the forward: 2 for chosen + rejected (DPO, RM, ...)
    reference: str = "none"        # "copy": a frozen reference model beside the policy (DPO, KTO, GRPO beta > 0)
    reference_forward: bool = False    # the reference's no_grad forward runs while the policy's graph is alive
    colocated_share: float = 0.0   # share of each GPU a colocated vLLM engine takes (GRPO vllm_mode colocate)
    teacher_params: int = 0        # a frozen distillation teacher beside the student (torchtune KD recipes)
    parallelism: Parallelism | None = None   # a pretraining framework's mesh (runtime torchtitan)
    rollout: Rollout | None = None  # online RL: the rollout and log-prob phases around the update (memory/rl.py)
    generation_rows: int = 0       # completions model.generate makes at once between steps (GRPO / RLOO without vLLM)
    sync_each_batch: bool = False  # FSDP: reduce-scatter every micro-batch (torchtune; the HF Trainer's
                                   # accelerator_config.sync_each_batch) instead of no_sync's unsharded grads
    empty_cache_each_step: bool = False   # the loop calls torch.cuda.empty_cache() before each step
    # The loop holds each micro-batch's loss (and with it the autograd graph) until the next one's loss is
    # made (LitGPT's fit loops): what autograd Functions keep as ctx attributes lives that long
    graph_held: bool = False
    bnb_4bit: str = "nf4-dq"       # the 4-bit kind: nf4 / fp4, "-dq" with double-quantized absmax (QLoRA's nf4-dq)
    # LitGPT's QLoRA swaps the embedding for bitsandbytes' StableEmbedding and keeps the one it replaced (a local of
    # its main() through training): a second copy of the token embeddings
    embedding_copy: bool = False
    # Launches the framework refuses for this job (``LAUNCH_LIMITS``): the hint search proposes none of them
    refuses: frozenset[str] = frozenset()
    origins: dict[str, Origin] = field(default_factory=dict, compare=False)
    vocabulary: dict[str, str] = field(default_factory=dict, compare=False)   # setting -> the source that spells it
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """"auto" is the kernel transformers picks for the model type (``Block.default_attn``).
        The one precision rule (docs/memory-model.md, "Precision"): where the script holds the
        weights (plain PyTorch, FSDP), 16-bit weights without mixed precision compute in their own
        dtype — pure 16-bit training, not fp32."""
        if self.attn == "auto":
            object.__setattr__(self, "attn", self.model.block.default_attn)
        if self.load_in_8bit and self.mode == "train" and (self.runtime == "fsdp" or self.zero_stage == 3):
            raise UnplannableError("an 8-bit (LLM.int8) base under FSDP or ZeRO-3 is not modelled: bitsandbytes' "
                                   "Int8Params carry their scales outside the tensor a shard would split; no "
                                   "memory estimate (QLoRA's 4-bit path is the sharded one)")
        if self.runtime in ("torch", "fsdp") and self.precision == "fp32" and self.weights_dtype in PURE:
            object.__setattr__(self, "precision", PURE[self.weights_dtype])

    @property
    def rows(self) -> int:
        """Sequences in one forward: the micro-batch, twice for a paired stage's chosen and rejected."""
        return self.micro_batch * self.rows_per_example

    @property
    def quantized_base(self) -> bool:
        """A bitsandbytes base (NF4 or LLM.int8): its linears are not autocast-cast; each matmul
        dequantizes the weight inside the layer and returns the input's dtype."""
        return self.load_in_4bit or self.load_in_8bit

    @property
    def autocast(self) -> bool:
        """torch runtime with fp32 weights and a 16-bit compute dtype: torch.autocast."""
        return self.runtime == "torch" and self.weights_dtype == "float32" and self.precision != "fp32"

    @property
    def batch_world(self) -> int:
        """The ranks DeepSpeed's batch arithmetic divides train_batch_size by (``global_batch``)."""
        return max(1, self.cluster.world_size // (self.tensor_parallel * self.batch_split))

    @property
    def data_parallel(self) -> int:
        """ZeRO shards over the data-parallel degree: world / (TP x PP) (docs/reference.md section 2);
        FSDP's hybrid strategies shard within a node and replicate across nodes; a file that says
        the shard group (Accelerate's dp_shard x cp, ``shard_degree``) is taken at its word."""
        if self.shard_degree:
            return self.shard_degree
        if self.runtime == "fsdp" and self.fsdp_strategy.startswith("HYBRID"):
            return max(1, self.cluster.per_node // self.tensor_parallel)
        return max(1, self.cluster.world_size // (self.tensor_parallel * self.pipeline_parallel))

    @property
    def tp_split(self) -> frozenset[str]:
        """The parameter groups tensor parallelism splits: DeepSpeed AutoTP's reading of the
        family's transformers tp_plan, or under Accelerate and plain PyTorch transformers' own."""
        if self.runtime == "megatron":      # its routed experts are split over its expert grid instead (EP x ETP:
            return OWN_CODE_SPLIT - {"experts"}    # memory/runtimes/megatron/states.py)
        if self.runtime == "torchtitan":    # its TP plan: embedding, output and every linear
            return OWN_CODE_SPLIT
        return autotp_split(self.model) if self.runtime == "deepspeed" else hf_split(self.model)

    def tp_divides(self, group: str) -> int:
        """What tensor parallelism divides one group's tensors by: TP where it splits them, else 1."""
        return self.tensor_parallel if group in self.tp_split else 1

    @property
    def setup_name(self) -> str:
        """The runtime as its users name it: "ZeRO-3", "FSDP2 FULL_SHARD", "PyTorch DDP", with
        the tensor-parallel degree when there is one ("ZeRO-2 + TP 2")."""
        if self.runtime == "deepspeed":
            name = f"ZeRO-{self.zero_stage}"
        elif self.runtime == "fsdp":
            name = f"FSDP{self.fsdp_version} {self.fsdp_strategy}"
        elif self.runtime == "torchtitan":
            name = f"torchtitan FSDP2 {self.data_parallel}" + (f" + PP {self.pipeline_parallel}"
                                                               if self.pipeline_parallel > 1 else "")
            name += f" + CP {self.parallelism.context}" if self.parallelism.context > 1 else ""
        elif self.runtime == "megatron":
            par = self.parallelism
            name = "Megatron" + (f" FSDP {par.fsdp}" if par.fsdp else " distributed optimizer"
                                 if par.distributed_optimizer else " DDP") + \
                (f" + PP {par.pipeline}" if par.pipeline > 1 else "") + \
                (f" + CP {par.context}" if par.context > 1 else "")
        else:
            name = "PyTorch DDP" if self.data_parallel > 1 else "PyTorch"
        return name + (f" + TP {self.tensor_parallel}" if self.tensor_parallel > 1 else "")

    @property
    def frozen(self) -> bool:
        """A GPU group that trains nothing (``Rollout.trains`` off): its no-grad forward is the job."""
        return self.rollout is not None and not self.rollout.trains

    def with_changes(self, **changes) -> Plan:
        return replace(self, **changes)

    def refused(self) -> bool:
        """Whether the framework refuses to start the job as this plan runs it (``refuses``)."""
        return any(LAUNCH_LIMITS[limit](self) for limit in self.refuses)


# What a framework may refuse to start (``Plan.refuses``), as a test of the plan: LLaMA-Factory's
# layer-wise optimizers under any distributed launch, layer-wise BAdam outside ZeRO-3, GaLore /
# APOLLO under DeepSpeed, pure_bf16 under ZeRO-3 (readers/llamafactory.py REFUSALS); a parameter offload
# that no flag of the framework sets (vocabulary.REFUSED_BY).
LAUNCH_LIMITS = {
    "always": lambda plan: True,
    "distributed": lambda plan: plan.cluster.world_size > 1,
    "distributed-without-zero3": lambda plan: plan.cluster.world_size > 1 and not (
        plan.runtime == "deepspeed" and plan.zero_stage == 3),
    "deepspeed": lambda plan: plan.runtime == "deepspeed",
    "zero3": lambda plan: plan.runtime == "deepspeed" and plan.zero_stage == 3,
    "param-offload": lambda plan: plan.offload_param not in (None, "", "none"),
    "unsharded-checkpointing": lambda plan: plan.grad_checkpointing and plan.runtime != "fsdp",
}


def _from_file(fact: Fact, name: str, origins: dict[str, Origin]) -> None:
    origins[name] = Origin("file", fact.location) if fact.from_file else Origin("default", text="DeepSpeed default")


def _micro_batch(ds: DeepSpeedConfig, flags: Flags, world: int, origins: dict, notes: list[str]) -> int:
    """DeepSpeed's own inference of the micro-batch (runtime/config.py ``_set_batch_related_parameters``):
    given explicitly, or train_batch // world // grad_accum with integer division."""
    mb, tb = ds.micro_batch.count, ds.train_batch.count
    if flags.wins("micro_batch"):
        origins["micro_batch"] = flags.origin("micro_batch")
        return flags.micro_batch
    if mb:
        origins["micro_batch"] = Origin("file", ds.micro_batch.location)
        return mb
    if tb:
        accum = ds.grad_accum.count or flags.grad_accum or 1
        origins["micro_batch"] = Origin("file", ds.train_batch.location)
        return max(1, tb // world // accum)
    if flags.micro_batch is not None:
        origins["micro_batch"] = flags.origin("micro_batch")
        return flags.micro_batch
    notes.append("micro-batch not set in the file ('auto' or absent) and no --micro-batch: assumed 1")
    origins["micro_batch"] = Origin("default", text="assumed 1")
    return 1


def _grad_accum(fact: Fact, flags: Flags, origins: dict, train_batch: Fact | None = None, micro_batch: int = 0,
                world: int = 1) -> int:
    """``--grad-accum`` stated, else the file's gradient_accumulation_steps, else ``--grad-accum`` /
    the settings', else what DeepSpeed derives from a stated train_batch_size and the micro-batch
    (runtime/config.py ``_set_batch_related_parameters``: train_batch // micro // world), else 1."""
    if flags.wins("grad_accum"):
        origins["grad_accum"] = flags.origin("grad_accum")
        return flags.grad_accum
    if fact.count and fact.from_file:
        origins["grad_accum"] = Origin("file", fact.location)
        return fact.count
    if flags.grad_accum:
        origins["grad_accum"] = flags.origin("grad_accum")
        return flags.grad_accum
    if train_batch is not None and train_batch.from_file and train_batch.count and micro_batch:
        derived = train_batch.count // micro_batch // max(1, world)
        if derived > 1:
            origins["grad_accum"] = Origin("file", train_batch.location,
                                           f"train_batch_size {train_batch.count} / micro-batch {micro_batch} / {world}")
            return derived
    return 1


def _precision(ds: DeepSpeedConfig, flags: Flags, origins: dict, notes: list[str]) -> str:
    """The file's precision where it states one (a stated ``--mixed-precision`` replaces it, said
    as VL007). Where it says "auto" or nothing, what the HF Trainer and Accelerate make of it:
    ``HfTrainerDeepSpeedConfig.trainer_config_process`` (transformers 5.24.0) fills each section's
    ``enabled: auto`` from the Trainer's own flag, then ``DeepSpeedPlugin.set_mixed_precision``
    (accelerate 1.15.0) adds ``{"enabled": true}`` for the Trainer's precision where the file has
    no such section. So ``fp16: auto`` alone under a bf16 Trainer trains in bf16, and only a
    section written ``enabled: false`` keeps the Trainer's precision off."""
    value = ds.precision.value
    if ds.precision.from_file and value != AUTO:
        if flags.wins("precision"):
            origins["precision"] = flags.origin("precision")
            return flags.precision
        _from_file(ds.precision, "precision", origins)
        return value
    if flags.precision:
        trainer = flags.precision
        origins["precision"] = flags.origin("precision")
    elif value == AUTO:
        trainer = "bf16"
        notes.append("precision is 'auto' in the file and no --mixed-precision: assumed the Trainer runs bf16")
        origins["precision"] = Origin("default", text="assumed bf16")
    else:
        origins["precision"] = Origin("default", text="no fp16/bf16 section: DeepSpeed's fp32")
        return "fp32"
    section = ds.sections.get(trainer)
    if trainer == "fp32" or section is None or section.value in (AUTO, True):
        return trainer
    notes.append(f"the Trainer runs {trainer}, but the file's {trainer} section has enabled "
                 f"{section.value!r}: DeepSpeed trains in fp32")
    return "fp32"


def _stage(ds: DeepSpeedConfig, flags: Flags, origins: dict, notes: list[str]) -> int:
    value = ds.zero_stage.value
    if flags.wins("zero_stage"):
        origins["zero_stage"] = flags.origin("zero_stage")
        return flags.zero_stage
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        _from_file(ds.zero_stage, "zero_stage", origins)
        return value
    if flags.zero_stage is not None:
        origins["zero_stage"] = flags.origin("zero_stage")
        return flags.zero_stage
    raise UnplannableError(f"zero_optimization.stage must be 0, 1, 2 or 3 (got {value!r}): no memory estimate; "
                           "pass --zero-stage to make one anyway")


def _device(fact: Fact, name: str, origins: dict, notes: list[str]) -> str:
    device = str(fact.value)
    if device not in OFFLOAD_DEVICES:
        notes.append(f"{name} device {fact.value!r} is not none/cpu/nvme: read as none")
        device = "none"
    _from_file(fact, name, origins)
    return device


# DeepSpeed's own optimizer types (runtime/engine.py ``_configure_basic_optimizer``, 0.19.8) whose
# states are Adam's m and v per element: what a file's "optimizer" section builds.
DS_ADAM_TYPES = ("adam", "adamw", "fusedadam", "cpuadam", "onebitadam", "zerooneadam", "lamb", "onebitlamb",
                 "fusedlamb")


def _ds_optimizer(section: Fact, trainer: str, origins: dict, notes: list[str]) -> dict:
    """A DeepSpeed file with an ``optimizer`` section (``section``: its type) builds that optimizer,
    and the HF Trainer's ``optim`` is not used (transformers 5.24 integrations/deepspeed.py
    ``deepspeed_optim_sched``: a ``DummyOptim`` stands in): Adam's states whatever the recipe or
    ``--optimizer`` says."""
    if section.value is None:
        return {}
    if str(section.value).replace("_", "").lower() not in DS_ADAM_TYPES:
        notes.append(f"the file's optimizer {section.value!r} is not priced: estimated with {trainer}'s states")
        return {}
    if trainer != "adamw":
        notes.append(f"the file's optimizer section ({section.value}) is what DeepSpeed builds: the "
                     f"Trainer's {trainer} is not used, so Adam's states are counted")
    origins["optimizer"] = Origin("file", section.location)
    return {"optimizer": "adamw"}


def plan_from_deepspeed(ds: DeepSpeedConfig, model: ModelShape, cluster: Cluster, flags: Flags) -> Plan:
    origins: dict[str, Origin] = {}
    notes: list[str] = list(ds.notes)
    stage = _stage(ds, flags, origins, notes)
    if flags.seq_len is None:
        raise UsageError("--seq-len is required: DeepSpeed configs do not say how long the sequences are")
    origins["seq_len"] = flags.origin("seq_len")
    origins["grad_checkpointing"] = (flags.origin("grad_checkpointing") if flags.grad_checkpointing
                                     or "grad_checkpointing" in flags.origins else Origin("default", text="off"))
    parallel = _parallel(ds.tensor_parallel, [("sequence_parallel_size", ds.sequence_parallel)], flags.seq_len,
                         origins, notes)
    workload = {k: v for k, v in flags.workload.items() if k != "weights_dtype"} | parallel
    workload |= _ds_optimizer(ds.optimizer, workload.get("optimizer", "adamw"), origins, notes)
    batch_world = ds.batch_world(cluster.world_size, workload.get("tensor_parallel", 1))
    micro = _micro_batch(ds, flags, batch_world, origins, notes)
    return Plan(
        **workload,
        **_buffers(ds, model, origins, notes),
        model=model, cluster=cluster,
        precision=_precision(ds, flags, origins, notes),
        zero_stage=stage,
        overlap_comm=ds.overlap_comm.value if isinstance(ds.overlap_comm.value, bool) else stage == 3,
        offload_optimizer=_device(ds.offload_optimizer, "offload_optimizer", origins, notes),
        offload_param=_device(ds.offload_param, "offload_param", origins, notes),
        micro_batch=micro,
        grad_accum=_grad_accum(ds.grad_accum, flags, origins, ds.train_batch, micro, batch_world),
        global_batch=ds.train_batch.count if ds.train_batch.from_file else 0,
        batch_split=ds.sequence_parallel.count or 1,
        grad_checkpointing=flags.grad_checkpointing,
        origins=origins,
        assumptions=tuple(notes),
    )


# What the HF Trainer / Accelerate integration writes for "auto" (transformers integrations/deepspeed.py,
# docs/config-formats.md §A): sizes from the model's hidden size
AUTO_BUFFERS = {
    "reduce_bucket_size": ("hidden_size**2", lambda h: h * h),
    "prefetch_bucket_size": ("0.9 * hidden_size**2", lambda h: int(0.9 * h * h)),
    "param_persistence_threshold": ("10 * hidden_size", lambda h: 10 * h),
}


def _buffers(ds: DeepSpeedConfig, model: ModelShape, origins: dict, notes: list[str]) -> dict[str, int]:
    """The ZeRO buffer sizes the file sets, with "auto" filled in as the HF integration does."""
    out = {}
    for name, fact in ds.buffers.items():
        value = fact.value
        if value == AUTO:
            rule = AUTO_BUFFERS.get(name)
            if rule is None:
                continue
            value = rule[1](model.hidden_size)
            notes.append(f"{name} \"auto\" = {rule[0]} = {value:,} (as the HF Trainer fills it)")
        out[name] = value
        origins[name] = Origin("file", fact.location)
    return out


def _parallel(tp: Fact | None, splits: list[tuple[str, Fact]], seq_len: int, origins: dict,
              notes: list[str]) -> dict:
    """Tensor parallelism and sequences split over GPUs, where the file says them: the TP degree
    (the file's, over ``--tp``) and the sequence each GPU keeps activations and logits for —
    DeepSpeed's Ulysses ``sequence_parallel_size`` and Accelerate's context / sequence parallel
    sizes give every rank of a split seq / split tokens (ring attention and Ulysses' all-to-all
    move the rest in and out a chunk at a time)."""
    out: dict = {}
    if tp is not None and tp.from_file and tp.value > 1:
        out["tensor_parallel"] = tp.value
        origins["tensor_parallel"] = Origin("file", tp.location)
    named = [(name, fact.value) for name, fact in splits if fact.from_file and fact.value > 1]
    split = math.prod(value for _, value in named)
    out["seq_len"] = max(1, seq_len // split)
    if split > 1:
        said = " x ".join(f"{name} {value}" for name, value in named)
        notes.append(f"sequences split {split} ways ({said}): each GPU keeps the activations and logits of "
                     f"{out['seq_len']:,} of the {seq_len:,} tokens")
    return out


RUNTIMES = {"NO": "torch", "MULTI_GPU": "torch", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}


def plan_from_accelerate(acc, model: ModelShape, cluster: Cluster, flags: Flags) -> Plan:
    """An Accelerate config: runtime from ``distributed_type``, precision from ``mixed_precision``,
    ZeRO stage and offload from ``deepspeed_config``, strategy and offload from ``fsdp_config``.
    The micro-batch and sequence length are the training script's: from flags or settings."""
    from vramlint.readers.accelerate import PRECISION
    notes: list[str] = list(acc.notes)
    kind = acc.distributed_type.value
    runtime = RUNTIMES.get(kind)
    if runtime is None:
        raise UsageError(f"{acc.distributed_type.location or acc.document.path}: distributed_type {kind} is not "
                         "modelled (vramlint reads NO, MULTI_GPU, DEEPSPEED and FSDP)")
    if flags.seq_len is None:
        raise UsageError("--seq-len is required: Accelerate configs do not say how long the sequences are")
    origins = {"precision": Origin("file", acc.mixed_precision.location)}
    precision = PRECISION.get(acc.mixed_precision.value, "bf16")
    if runtime == "fsdp" and flags.workload.get("load_in_4bit") and precision == "fp32":
        precision = "bf16"
        notes.append("QLoRA under FSDP: transformers' Trainer sets FSDP's mixed precision to bnb_4bit_quant_storage "
                     "(bfloat16), whatever mixed_precision 'no' says (update_fsdp_plugin_peft)")
    weights = flags.workload.get("weights_dtype")
    if runtime == "fsdp":
        weights = fsdp_weights_dtype(precision, weights, bool(flags.workload.get("lora_rank")))
        flags = replace(flags, workload={**flags.workload, "adapter_dtype": fsdp_adapter_dtype(
            precision, flags.workload.get("adapter_dtype", "float32"))})
    if runtime == "torch" and weights is None:
        weights = "float32"
        notes.append("weights loaded in float32 under autocast (Accelerate's default; --weights-dtype bfloat16 "
                     "if the script loads 16-bit weights)")
    stage_fact = acc.zero_stage if runtime == "deepspeed" else acc.fsdp_strategy
    if stage_fact.location:
        origins["zero_stage"] = Origin("file", stage_fact.location)
    micro = flags.micro_batch or 1
    if flags.micro_batch is None:
        notes.append("micro-batch is the training script's: --micro-batch (assumed 1)")
    par = acc.parallelism
    parallel = _parallel(par.get("tp"), [(f"{name}_size", par[name]) for name in ("cp", "sp") if name in par],
                         flags.seq_len, origins, notes)
    shard = _shard_degree(par, runtime, notes)
    workload = {k: v for k, v in flags.workload.items() if k != "weights_dtype"} | parallel | shard
    deepspeed = runtime == "deepspeed"
    return Plan(model=model, cluster=cluster, precision=precision, runtime=runtime, weights_dtype=weights,
                zero_stage=_accelerate_stage(acc.zero_stage, flags) if deepspeed else 0,
                offload_optimizer=_device(acc.offload_optimizer, "offload_optimizer", origins, notes) if deepspeed
                else "none",
                offload_param=(_device(acc.offload_param, "offload_param", origins, notes) if deepspeed
                               else "cpu" if acc.fsdp_offload.value else "none"),
                fsdp_strategy=acc.fsdp_strategy.value, fsdp_version=acc.fsdp_version.value, micro_batch=micro,
                source="accelerate", grad_accum=_grad_accum(acc.grad_accum if runtime == "deepspeed" else
                                                            Fact(None), flags, origins),
                grad_checkpointing=flags.grad_checkpointing or bool(acc.activation_checkpointing.value),
                origins=origins, assumptions=tuple(notes), **workload)


def _accelerate_stage(fact: Fact, flags: Flags) -> int:
    """``deepspeed_config.zero_stage`` (an int 0-3 in every config ``accelerate config`` writes);
    anything else needs ``--zero-stage`` for an estimate."""
    value = fact.value
    if flags.wins("zero_stage") or not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3):
        if flags.zero_stage is None:
            raise UnplannableError(f"deepspeed_config.zero_stage must be 0, 1, 2 or 3 (got {value!r}): no memory "
                                   "estimate; pass --zero-stage to make one anyway")
        return flags.zero_stage
    return value


def _shard_degree(par: dict[str, Fact], runtime: str, notes: list[str]) -> dict:
    """FSDP2 under Accelerate's ParallelismConfig shards over its ``dp_shard_cp`` mesh (dp_shard
    x cp) and replicates over dp_replicate (HSDP); DeepSpeed and FSDP without replicas shard over
    every rank that is not a TP rank, the default."""
    if runtime != "fsdp" or "dp_replicate" not in par or par["dp_replicate"].value <= 1:
        return {}
    degree = par["dp_shard"].value if "dp_shard" in par else 1
    degree *= par["cp"].value if "cp" in par else 1
    notes.append(f"FSDP shards over dp_shard x cp = {degree} GPUs and replicates {par['dp_replicate'].value} "
                 "times (parallelism_config)")
    return {"shard_degree": degree}


def stage_settings(stage: str, micro_batch: int, seq_len: int, lora: bool, reference: object, notes: list[str],
                   why: str = "") -> dict:
    """What a training stage adds to one model's SFT step (memory/stages.py), for a recipe's stage
    or ``--stage``: chosen and rejected rows in one forward (``PAIRED_STAGES``), a frozen
    reference copy (``REFERENCE_STAGES``) unless PEFT gives it by disabling the adapter.
    ``reference``: "auto" (the stage's rule), True (a separate one is named), False (none)."""
    from vramlint.readers.recipe import GENERATING_STAGES, PAIRED_STAGES, REFERENCE_STAGES
    out: dict = {}
    if stage in PAIRED_STAGES:
        out["rows_per_example"] = 2
        notes.append(f"stage {stage}: chosen and rejected in one forward, {2 * micro_batch} rows of {seq_len:,} tokens")
    if reference is True or (reference == "auto" and stage in REFERENCE_STAGES and not lora):
        out["reference"] = "copy"
        notes.append(f"stage {stage}: a frozen reference copy of the model beside it")
    elif reference == "auto" and stage in REFERENCE_STAGES:
        notes.append(f"stage {stage}: the reference is the same model with its LoRA adapter disabled (no copy)")
    elif reference is False and stage in REFERENCE_STAGES:
        notes.append(f"stage {stage}: no reference model ({why})")
    if reference is not False and stage in REFERENCE_STAGES and stage not in GENERATING_STAGES:
        out["reference_forward"] = True
        notes.append(f"stage {stage}: the reference's no_grad forward runs after the policy's, while its graph and "
                     "logits are alive")
    return out


def workload_from_flags(flags: dict) -> dict:
    """Plan fields that only the command line gives (no DeepSpeed file states them)."""
    attn = flags.get("attn") or "auto"
    targets = tuple(t.strip() for t in (flags.get("lora_targets") or "all-linear").split(",") if t.strip())
    return {"optimizer": flags.get("optimizer") or "adamw", "attn": attn,
            "lora_rank": flags.get("lora_rank") or (16 if flags.get("load_in_4bit") or flags.get("load_in_8bit")
                                                     else 0), "lora_targets": targets,
            "lora_dropout": flags.get("lora_dropout") or 0.0, "dora": bool(flags.get("dora")),
            "load_in_4bit": bool(flags.get("load_in_4bit")), "load_in_8bit": bool(flags.get("load_in_8bit")),
            "adapter_dtype": flags.get("adapter_dtype") or "float32", "sync_each_batch": bool(flags.get("sync_each_batch")),
            "loss": flags.get("loss") or "full", "optimizer_impl": flags.get("optimizer_impl") or "foreach",
            "paged_optimizer": bool(flags.get("paged_optimizer")), "optimizer_in_bwd": bool(flags.get("optimizer_in_bwd")),
            "activation_offload": bool(flags.get("activation_offload")),
            "sdpa_repeat_kv": bool(flags.get("sdpa_repeat_kv")),
            "graph_held": bool(flags.get("graph_held")), "bnb_4bit": flags.get("bnb_4bit") or "nf4-dq",
            "embedding_copy": bool(flags.get("embedding_copy")),
            "attention_mask": not flags.get("no_attention_mask"),
            "tensor_parallel": flags.get("tp") or 1,
            "empty_cache_each_step": bool(flags.get("empty_cache_each_step")),
            **({"weights_dtype": flags["weights_dtype"]} if flags.get("weights_dtype") else {})}


def _runtime(flags: dict) -> str:
    """``--runtime``, or the one the other flags name: a ZeRO stage means DeepSpeed, an FSDP
    strategy FSDP; a flag of one runtime given with another runtime is a usage error."""
    deepspeed = ["--zero-stage"] if flags.get("zero_stage") is not None else []
    deepspeed += ["--offload-optimizer"] if flags.get("offload_optimizer") not in (None, "none") else []
    fsdp = ["--fsdp-strategy"] if flags.get("fsdp_strategy") else []
    fsdp += ["--fsdp-version"] if flags.get("fsdp_version") else []
    implied = "deepspeed" if deepspeed else "fsdp" if fsdp else None
    if flags.get("offload_param") not in (None, "none"):
        implied = implied or "deepspeed"
        if (flags.get("runtime") or implied) == "torch":
            raise UsageError("--offload-param is a deepspeed or fsdp setting: add --runtime deepspeed or fsdp")
    runtime = flags.get("runtime") or implied or "torch"
    for name, wanted in (("deepspeed", deepspeed), ("fsdp", fsdp)):
        if wanted and runtime != name:
            raise UsageError(f"{wanted[0]} is a {name} setting: add --runtime {name} (or drop it)")
    return runtime


def _loaded_quantized(model: ModelShape, flags: dict, notes: list[str]) -> tuple[ModelShape, list[str]]:
    """``--infer --load-in-4bit`` / ``--load-in-8bit``: transformers loads the checkpoint through
    ``BitsAndBytesConfig``, which replaces the decoder's linears (NF4 with double quantization, as
    QLoRA loads them, or LLM.int8); the rest keeps the load dtype. A checkpoint that is quantized
    already keeps its own method (transformers refuses a second quantization config)."""
    from vramlint.models.quantization import int8, nf4
    if model.quantization is not None:
        raise UsageError(f"{model.name} is quantized already ({model.quantization.method}): drop --load-in-4bit / "
                         "--load-in-8bit")
    quant = nf4() if flags.get("load_in_4bit") else int8()
    notes = notes + [f"weights loaded through bitsandbytes: {quant.method} on the decoder's linears "
                     f"({quant.detail}), the rest in the load dtype"]
    return replace(model, quantization=quant), notes


def plan_from_flags(model: ModelShape, cluster: Cluster, flags: dict) -> Plan:
    """``vramlint estimate``: everything from the command line, defaults said out loud."""
    notes: list[str] = []
    infer = bool(flags.get("infer"))
    if not flags.get("seq_len"):
        raise UsageError("--seq-len is required")
    precision = {"no": "fp32"}.get(flags.get("mixed_precision") or "bf16", flags.get("mixed_precision") or "bf16")
    weights = flags.get("weights_dtype")
    runtime = _runtime(flags)
    script_dtype = infer or runtime == "torch"    # DeepSpeed and FSDP set the parameters' dtype themselves
    quantized = flags.get("load_in_4bit") or flags.get("load_in_8bit")
    if infer and quantized:
        model, notes = _loaded_quantized(model, flags, notes)
    if weights is None and quantized and not infer:
        weights = "float32"
        note = (f"{'QLoRA' if flags.get('load_in_4bit') else 'LoRA on LLM.int8'}: the parameters bitsandbytes "
                "leaves unquantized (embeddings, norms, lm_head) in float32 "
                "under autocast, as peft's prepare_model_for_kbit_training and TRL's SFTTrainer leave them "
                "(--weights-dtype bfloat16 if the script keeps them 16-bit)")
    elif weights is None:
        weights = model.dtype if infer else ("float32" if precision == "fp32" else "bfloat16")
        note = f"weights loaded in {weights} (--weights-dtype to change)"
    else:
        note = ""
    if note and script_dtype:
        notes.append(note)
    if runtime == "fsdp" and not infer:
        loaded = flags.get("weights_dtype")
        weights = fsdp_weights_dtype(precision, loaded, bool(flags.get("lora_rank") or flags.get("load_in_4bit")))
        flags = {**flags, "adapter_dtype": fsdp_adapter_dtype(precision, flags.get("adapter_dtype") or "float32")}
        if weights == "float32" and loaded not in (None, "float32"):
            notes.append(f"weights loaded in {loaded}: under mixed precision Accelerate upcasts what needs grads to "
                         "float32 shards before FSDP wraps them (accelerate 1.15 accelerator.py:2024-2038, "
                         "utils/fsdp_utils.py:816-820); --mixed-precision no for pure 16-bit shards")
    if (flags.get("attn") or "auto") == "auto":
        kernel = model.block.default_attn
        notes.append(f"attention kernel: {kernel}, transformers' default for {model.model_type or 'the model'}"
                     + (" (every b·heads·s² score kept); --attn flash_attention_2 to model FlashAttention"
                        if kernel == "eager" else " (no s² scores); --attn eager to model eager attention"))
    if not infer and not flags.get("empty_cache_each_step"):
        notes.append("the training loop keeps PyTorch's cache between steps, as HF Trainer and Accelerate do "
                     "(--empty-cache-each-step if it calls torch.cuda.empty_cache() before each step)")
    batch = flags.get("batch") if infer and flags.get("batch") else flags.get("micro_batch") or 1
    stage = {} if infer or not flags.get("stage") else stage_settings(
        flags["stage"], batch, flags["seq_len"], bool(flags.get("lora_rank") or flags.get("load_in_4bit")
                                                      or flags.get("load_in_8bit")), "auto", notes)
    return Plan(model=model, cluster=cluster, precision=precision, mode="infer" if infer else "train",
                runtime=runtime, weights_dtype=weights,
                zero_stage=flags.get("zero_stage") or 0, offload_optimizer=flags.get("offload_optimizer") or "none",
                offload_param=flags.get("offload_param") or "none", micro_batch=batch, seq_len=flags["seq_len"],
                grad_checkpointing=bool(flags.get("grad_checkpointing")), assumptions=tuple(notes),
                grad_accum=1 if infer else flags.get("grad_accum") or 1,
                fsdp_strategy=flags.get("fsdp_strategy") or "FULL_SHARD", fsdp_version=flags.get("fsdp_version") or 1,
                **{k: v for k, v in workload_from_flags(flags).items() if k != "weights_dtype"}, **stage)


__all__ = ["Flags", "Origin", "Plan", "plan_from_accelerate", "plan_from_deepspeed", "plan_from_flags"]
