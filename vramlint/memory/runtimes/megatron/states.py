"""Megatron-LM's model states on one pipeline rank (core_v0.19.0 megatron/core/distributed/
param_and_grad_buffer.py, optimizer/distrib_optimizer.py, optimizer/optimizer.py; the table of
docs/user-guide/features/dist_optimizer.md).

Every rank holds its TP share of its pipeline stage's parameters in the compute dtype and their
gradients in one contiguous DDP buffer (fp32 under --bf16: ``accumulate_allreduce_grads_in_fp32``),
both whole. The optimizer keeps fp32 main parameters (none when the parameters are fp32 already)
and Adam's two fp32 moments (SGD's one momentum): whole on every rank
(``Float16OptimizerWithFloat16Params``), or under --use-distributed-optimizer sharded over the dp x
cp ranks (``Plan.shard_degree``). With bf16: 18 B a parameter, or 6 + 12/d. With tied embeddings
and pipeline parallelism the last stage holds its own copy of the word embeddings for the output
layer (``LanguageModule.setup_embeddings_and_output_layer``).

The routed experts of MoE layers are split over the expert grid instead of TP: each rank holds
E / EP experts, each cut ETP ways (``experts.py`` TEGroupedMLP), in the same dtype and with their
gradients in DDP's expert buffer; the distributed optimizer shards their states over the expert
data-parallel group, world / (ETP x EP x PP) (parallel_state.py:870-884; Megatron's own
theoretical_memory_usage prices them so: ``num_bytes_per_parameter(expert_data_parallel_size)``)."""

from __future__ import annotations

from vramlint.memory.parts.components import Component
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.parts.states import States
from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.memory.runtimes.megatron.fsdp import fsdp_states
from vramlint.memory.runtimes.megatron.layout import ranks
from vramlint.models.shape import MLA, Attention
from vramlint.plan import Plan

SOURCE = ("Megatron-LM core_v0.19.0 param_and_grad_buffer.py (contiguous param and grad buffers), "
          "distrib_optimizer.py / optimizer.py (fp32 main params + Adam states), dist_optimizer.md")


def rank_params(plan: Plan, rank: Rank) -> tuple[int, int]:
    """The rank's parameters (its TP share of its chunks' layers, the embedding on the first, the
    output layer on the last: the word embeddings again where they are tied and pipelined), and
    apart its share of the routed experts (E x its layers' experts / (EP x ETP))."""
    m = plan.model
    layers = decoder_params(plan, rank)
    params = sum(own for own, _ in layers)
    experts = sum(routed for _, routed in layers)
    for stage in rank.stages:
        params += m.embedding_params if stage.embedding else 0
        if stage.head:              # the word embeddings again where tied, or where MTP embeds the shifted tokens
            copy = m.embedding_params if (not m.head_params or m.mtp_depths) and not stage.embedding else 0
            params += m.head_params + m.final_norm_params + copy
    par = plan.parallelism
    return params, -(-experts // (par.expert * par.expert_tp(plan.tensor_parallel)))


def decoder_params(plan: Plan, rank: Rank) -> list[tuple[int, int]]:
    """Each decoder layer of the rank's chunks: its TP-local parameters but the routed experts, and
    those experts whole (a rank holds 1 / (EP x ETP) of them); on the last stage each multi-token
    prediction depth's layers too (multi_token_prediction.py: built where the output layer is)."""
    m = plan.model
    out = []
    for stage in rank.stages:
        layers = [m.layers[i] for i in stage.layers] + (list(m.mtp) * m.mtp_depths if stage.head else [])
        for layer in layers:
            own = layer.params.total - layer.params.experts + duplicated(layer.attention, m.hidden_size,
                                                                         m.tensor_parallel)
            out.append((own, layer.params.experts))
    return out


def duplicated(att: Attention, h: int, tp: int) -> int:
    """What a TP rank holds of multi-latent attention's down-projections beyond its 1/TP share:
    Megatron builds them as duplicated TELinears (multi_latent_attention.py:528-540, 583-599:
    ``parallel_mode='duplicated'``), whole on every rank, where the TP-local model (``tp_local``)
    cut them as it cuts the other attention projections. Megatron's theoretical_memory_usage divides
    them by TP with the rest of the attention, and so counts less than the ranks hold."""
    if att.kind != MLA or tp <= 1:
        return 0
    downs = [h * att.q_latent_dim] if att.q_latent_dim else []
    downs.append(h * att.kv_latent_dim)
    return sum(d - -(-d // tp) for d in downs)


APEX_SOURCE = ("Apex 810ffae contrib/optimizers/distributed_fused_adam.py as NeMo v2.4.0 sets it up "
               "(megatron_base_model.py:831-856): StateBucket (int16 param_remainders_shard, fp32 exp_avg / "
               "exp_avg_sq shards), _init_grad_buffer (one whole gradient buffer), _start_bucket_grad_sync "
               "(sync_grads_shard)")
HOST_SOURCE = ("megatron-core 0.15.0 optimizer/cpu_offloading/hybrid_optimizer.py _get_sub_optimizer_param_groups, "
               "distrib_optimizer.py:373-402 (main copies on the GPU unless the precision-aware optimizer), "
               "optimizer_config.py:147-150 (optimizer_offload_fraction 0.0 by default)")
DDP_SOURCE = "torch nn/parallel/distributed.py (Reducer buckets apart from .grad without gradient_as_bucket_view)"


def param_bytes(plan: Plan) -> int:
    """Bytes a parameter as the model holds it: its compute dtype under Megatron's --bf16 / --fp16
    (NeMo's megatron_amp_O2), fp32 where the parameters stay fp32 (fp32 training, or autocast)."""
    return DTYPE_BYTES[plan.weights_dtype or "float32"]


def _optimizer_bytes(plan: Plan) -> tuple[float, str]:
    """Bytes a parameter of the optimizer's on the GPU: a main copy of 16-bit parameters (fp32, or
    Apex's int16 remainders that complete bf16 parameters to fp32: NeMo's store_param_remainders,
    fp16 ones getting fp32 copies, store_params) and the moments, less what Megatron-core's
    HybridDeviceOptimizer holds on the host (``optimizer_cpu_offload``: the moments of its
    ``optimizer_offload_fraction`` of the shard, and their fp32 main copies where the precision-aware
    optimizer makes them there; otherwise the distributed optimizer made them on the GPU first)."""
    par = plan.parallelism
    remainders = par.apex_adam and plan.weights_dtype == "bfloat16"
    main = 0 if param_bytes(plan) == 4 else 2 if remainders else 4
    moments = 4 if plan.optimizer == "sgd" else 8
    words = ({4: "fp32 main + ", 2: "int16 remainders + ", 0: ""}[main]
             + ("SGD momentum" if plan.optimizer == "sgd" else "Adam m, v (fp32)"))
    if not par.host_fraction:
        return main + moments, words
    kept = 1 - par.host_fraction
    on_gpu = (main * kept if par.host_main else main) + moments * kept
    return on_gpu, words + (f"; {par.host_fraction:g} of the shard's states on the host (optimizer_cpu_offload"
                            + (", the main copies too" if par.host_main else "") + ")")


def _shard(params: int, d: int, group: str) -> tuple[int, str]:
    over = f"{params:,} / {d} (distributed optimizer over {group})" if d > 1 else f"{params:,}"
    return -(-params // d), over


def megatron_states(plan: Plan, rank: Rank | None = None) -> States:
    """The states of ``rank`` (the first pipeline rank where none is named)."""
    rank = rank or ranks(plan)[0]
    dense, experts = rank_params(plan, rank)
    par = plan.parallelism
    c = param_bytes(plan)
    if par.fsdp == "optim_grads_params":
        grid = par.expert * par.expert_tp(plan.tensor_parallel)
        units = [(own, -(-routed // grid)) for own, routed in decoder_params(plan, rank)]
        return fsdp_states(plan, units, dense, experts, c)
    per, words = _optimizer_bytes(plan)
    groups = [(dense, plan.shard_degree if par.distributed_optimizer else 1, "dp x cp", "")]
    if experts:
        groups.append((experts, par.expert_shard if par.distributed_optimizer else 1, "the expert data-parallel group",
                       " (routed experts)"))
    source = APEX_SOURCE if par.apex_adam else SOURCE
    resting, gradients, step = [], [], []
    for p, d, group, what in groups:
        shard, over = _shard(p, d, group)
        resting += [Component(f"parameters{what}", c * p, f"{c} B x {p:,}", SOURCE),
                    Component(f"optimizer states{what}", int(per * shard), f"{per:g} B ({words}) x {over}",
                              HOST_SOURCE if par.host_fraction else source)]
        gradients.append(Component(f"gradient buffer{what}", par.grad_bytes * p,
                                   f"{par.grad_bytes} B x {p:,} (DDP buffer, whole)", source))
        if par.bucket_copy:
            gradients.append(Component(f"DDP gradient buckets{what}", par.grad_bytes * p, f"{par.grad_bytes} B x "
                                       f"{p:,} (gradient_as_bucket_view off: a second copy)", DDP_SOURCE))
        step += _step_copies(plan, shard, d, over, what)
    return States(resting, gradients, step, [])


def _step_copies(plan: Plan, shard: int, d: int, over: str, what: str) -> list[Component]:
    """What the step makes beside the buffer: Apex's reduce-scattered shard (its own tensor where
    its group ``d`` has more than one rank), or Megatron's fp32 copy of 16-bit gradients
    (``main_param.grad = main_grad.float()``, optimizer.py:1097)."""
    par = plan.parallelism
    if par.apex_adam:
        if d <= 1:
            return []
        return [Component(f"reduce-scattered gradient shard (step){what}", par.grad_bytes * shard,
                          f"{par.grad_bytes} B x {over} (sync_grads_shard, freed at zero_grad)", APEX_SOURCE)]
    if par.grad_bytes < 4 and param_bytes(plan) < 4:
        return [Component(f"fp32 gradient copy (step){what}", 4 * shard, f"4 B x {over} (16-bit gradients made fp32 "
                          "for the step, optimizer.py:1097)", SOURCE)]
    return []


def vision_tower(plan: Plan) -> Component:
    return Component("vision tower", 0, "Megatron's GPT model has none", SOURCE)


def frozen_shards(plan: Plan) -> int:
    return 1
