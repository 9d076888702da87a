"""Command line: ``vramlint check``, ``vramlint model``, ``vramlint models``, ``vramlint gpus``.

Exit codes (docs/design.md): 0 nothing at or above the failing severity, 1 findings that fail the
check, 2 usage errors, unreadable input or an internal error — never a traceback (set
``VRAMLINT_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from vramlint import __version__
from vramlint.errors import UsageError
from vramlint.findings import SEVERITY_RANK
from vramlint.readers import KINDS, SCRIPT_KIND

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability such as 0.05, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.9, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    """The workload flags ``check`` and ``estimate`` share; ``check`` takes from its files what they say."""
    from vramlint.plan import OPTIMIZERS
    p.add_argument("--gpus", help="e.g. 8x80GB, 8xH100, 2x8xA100-80GB, 1x24GB, 2x79.19GiB ([tool.vramlint] gpus)")
    p.add_argument("--model", help="HF id or short name from the catalog, or a config.json path ([tool.vramlint] model)")
    p.add_argument("--download", action="store_true",
                   help="fetch a model's config.json (never weights) from the Hugging Face Hub when the local cache "
                        "lacks it ([tool.vramlint] download)")
    p.add_argument("--config", metavar="PATH", help="settings file (default: [tool.vramlint] of the nearest pyproject.toml)")
    p.add_argument("--seq-len", type=_positive, help="tokens per sequence")
    p.add_argument("--micro-batch", type=_positive, help="training micro-batch per GPU (check: when the file says 'auto')")
    p.add_argument("--grad-checkpointing", action="store_true", help="the trainer enables gradient checkpointing")
    p.add_argument("--weights-dtype", choices=["float32", "bfloat16", "float16"],
                   help="dtype the weights are loaded in (torch runtime; default bfloat16 for training)")
    p.add_argument("--mixed-precision", choices=["no", "bf16", "fp16"], help="compute precision (default bf16)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="default adamw")
    p.add_argument("--lora-rank", type=_positive, help="train LoRA adapters of this rank on a frozen base")
    p.add_argument("--lora-targets", help="all-linear (default) or a list such as q,k,v,o")
    p.add_argument("--adapter-dtype", choices=["float32", "bfloat16", "float16"],
                   help="dtype of the LoRA adapters (default float32: PEFT's autocast_adapter_dtype; torchtune and "
                        "scripts that cast them keep the base's)")
    p.add_argument("--dora", action="store_true", help="PEFT use_dora: a magnitude vector per adapted linear and "
                                                       "its weight norm in each forward")
    p.add_argument("--lora-dropout", type=_probability, help="PEFT's lora_dropout (default 0, PEFT's default)")
    quant = p.add_mutually_exclusive_group()
    quant.add_argument("--load-in-4bit", action="store_true", help="QLoRA: NF4 base weights (bitsandbytes); with "
                                                                   "--infer, the checkpoint loaded in NF4")
    quant.add_argument("--load-in-8bit", action="store_true", help="LLM.int8 base weights (bitsandbytes) under "
                                                                   "LoRA; with --infer, the checkpoint loaded in int8")
    p.add_argument("--loss", choices=["full", "chunked", "chunked-compiled", "liger", "cce", "trl", "openrlhf", "verl",
                                     "verl-entropy", "none"],
                   help="how the loss is computed: full (transformers' ForCausalLMLoss, default), chunked (torchtune "
                        "CEWithChunkedOutputLoss; -compiled under compile), liger (fused linear cross-entropy), cce "
                        "(Cut Cross-Entropy), trl (TRL's fused LM head), none (a scalar head)")
    p.add_argument("--optimizer-impl", choices=["foreach", "fused"],
                   help="torch AdamW's implementation: foreach (default; a temporary copy in the step) or fused "
                        "(HF's adamw_torch_fused: none)")
    p.add_argument("--paged-optimizer", action="store_true",
                   help="bitsandbytes paged states (paged_adamw_8bit / _32bit): unified memory the host takes over")
    p.add_argument("--optimizer-in-bwd", action="store_true",
                   help="each parameter stepped and its gradient freed in backward (torchtune optimizer_in_bwd)")
    p.add_argument("--activation-offload", action="store_true",
                   help="checkpointed layer inputs copied to pinned host memory (torchtune enable_activation_offloading)")
    p.add_argument("--transformers-version", metavar="X.Y.Z",
                   help="the transformers the job runs on (default: the repository's pins, else installed, else "
                        "5.24.0); older releases keep more (the loss's shifted fp32 logits up to 4.48)")
    p.add_argument("--vllm-version", metavar="X.Y.Z",
                   help="the vLLM a config is served with (default: the repository's pins, else installed, else "
                        "0.19.0): its defaults apply (gpu_memory_utilization 0.92 from 0.20)")
    p.add_argument("--no-attention-mask", action="store_true",
                   help="the training step calls the model with input_ids and labels only, no attention_mask and no "
                        "cache (model(ids, labels=ids, use_cache=False)): transformers 4.53.1-4.57 then give SDPA a "
                        "causal mask they build")
    p.add_argument("--sync-each-batch", action="store_true",
                   help="FSDP with gradient accumulation: gradients reduce-scattered every micro-batch (torchtune; "
                        "the HF Trainer's accelerator_config.sync_each_batch) instead of kept unsharded under no_sync")
    p.add_argument("--empty-cache-each-step", action="store_true",
                   help="the training loop calls torch.cuda.empty_cache() before each step (default: it keeps "
                        "PyTorch's cache, as HF Trainer, Accelerate and DeepSpeed do)")
    p.add_argument("--attn", choices=["auto", "sdpa", "flash_attention_2", "eager"], help="attention kernel; auto (default): transformers' default for the model type (SDPA; eager for gpt-oss)")
    p.add_argument("--tp", type=_positive, help="tensor-parallel degree: what the runtime's TP splits (transformers' "
                                             "tp_plan, DeepSpeed AutoTP) is divided over it (a file's autotp_size "
                                             "/ parallelism_config wins)")


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; ``only``: the command being run, the one whose options are built (each
    ``add_argument`` builds a help formatter: the other commands' would cost every hook run)."""
    parser = argparse.ArgumentParser(prog="vramlint", description="Lint training configs for GPU memory.")
    parser.add_argument("--version", action="version", version=f"vramlint {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, options) in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=summary)
        if options is not None and only in (None, name):
            options(command)
    return parser


def _check_options(check: argparse.ArgumentParser) -> None:
    from vramlint.reporters import REPORTERS
    check.add_argument("files", nargs="+", metavar="FILE",
                       help="files, folders (walked with the hook's patterns) or - for standard input")
    check.add_argument("--stdin-filename", metavar="PATH", help="the name a file read from - is reported under")
    check.add_argument("--select", metavar="RULES", help="report only these rules: codes, names or prefixes (VL2)")
    check.add_argument("--ignore", metavar="RULES", help="skip these rules (replaces the settings' ignore list)")
    check.add_argument("--extend-ignore", metavar="RULES", help="skip these rules too (adds to the ignore list)")
    check.add_argument("--warn", metavar="RULES", help="report these rules' errors as warnings, e.g. VL005,VL011 to "
                                                       "let jobs that cannot be estimated pass ([tool.vramlint] warn)")
    _add_common(check)
    check.add_argument("--grad-accum", type=_positive, help="micro-batches per optimizer step, when the file says "
                                                            "'auto' or does not say (HF Trainer, Accelerate)")
    check.add_argument("--zero-stage", type=int, choices=[0, 1, 2, 3], help="when the file's stage is unusable")
    check.add_argument("--near-threshold", type=_fraction, help="warn above this share of GPU memory (default 0.90)")
    check.add_argument("--strict", action="store_true", help="warnings fail the check too")
    loud = check.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="store_true", help="each file's breakdown, plan and assumptions")
    loud.add_argument("-q", "--quiet", action="store_true", help="findings only")
    check.add_argument("--launch-config", metavar="PATH",
                       help="the Accelerate config (accelerate launch --config_file) or DeepSpeed JSON a training "
                            "recipe is launched with, when the recipe names neither ([tool.vramlint] launch_config)")
    check.add_argument("--kind", choices=(*KINDS, SCRIPT_KIND),
                       help="read every file as this format (default: detected from the content)")
    check.add_argument("--host-ram", help="host RAM per node, e.g. 512GB or 1TB, for offload checks (host-ram-exceeded)")
    check.add_argument("--format", choices=["auto", *sorted(REPORTERS)],
                       help="auto (default): github annotations inside GitHub Actions, else text")


def _estimate_options(est: argparse.ArgumentParser) -> None:
    _add_common(est)
    mode = est.add_mutually_exclusive_group(required=True)
    mode.add_argument("--train", action="store_true", help="a training step (forward, backward, optimizer)")
    mode.add_argument("--infer", action="store_true", help="inference with transformers: prefill with KV cache")
    est.add_argument("--batch", type=_positive, help="inference batch (sequences at once)")
    est.add_argument("--stage", choices=["sft", "pt", "rm", "dpo", "ipo", "orpo", "simpo", "cpo", "kto"],
                     help="training stage (default sft): paired stages put chosen and rejected in one forward; "
                          "dpo, ipo and kto keep a reference copy unless LoRA disables the adapter instead")
    est.add_argument("--grad-accum", type=_positive, help="micro-batches per optimizer step (training; default 1)")
    est.add_argument("--runtime", choices=["torch", "deepspeed", "fsdp"],
                     help="plain PyTorch / Accelerate / DDP (default), DeepSpeed (implied by --zero-stage) or FSDP "
                          "(implied by --fsdp-strategy)")
    est.add_argument("--fsdp-strategy",
                     choices=["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"],
                     help="FSDP sharding strategy (default FULL_SHARD)")
    est.add_argument("--fsdp-version", type=int, choices=[1, 2],
                     help="FSDP1 (flat parameters, Accelerate's default) or FSDP2 (fully_shard); default 1")
    est.add_argument("--zero-stage", type=int, choices=[0, 1, 2, 3], help="DeepSpeed ZeRO stage (default 0)")
    est.add_argument("--offload-optimizer", choices=["none", "cpu", "nvme"], default="none")
    est.add_argument("--offload-param", choices=["none", "cpu", "nvme"], default="none")
    est.add_argument("--format", choices=["text", "json"], default="text")


def _plan_options(plan: argparse.ArgumentParser) -> None:
    plan.add_argument("recipe", nargs="?", metavar="RECIPE", help="a training recipe: list the edits to it that fit")
    _add_common(plan)
    plan.add_argument("--near-threshold", type=_fraction, help="keep the peak under this share of memory (0.90)")
    plan.add_argument("--format", choices=["text", "json"], default="text")


def _model_options(model: argparse.ArgumentParser) -> None:
    from vramlint.reporters import REPORTERS
    model.add_argument("model", metavar="NAME|PATH")
    model.add_argument("--revision", help="a branch, tag or commit of a Hub repository (default main)")
    model.add_argument("--download", action="store_true", help="fetch its config.json from the Hub if the cache "
                                                              "lacks it")
    model.add_argument("--format", choices=sorted(REPORTERS), default="text")


def _rule_options(rule: argparse.ArgumentParser) -> None:
    rule.add_argument("code", nargs="?", metavar="CODE|NAME")


# The subcommands: what each does (the top help) and the function that adds its options.
SUBCOMMANDS = {
    "check": ("predict the per-GPU peak of training recipes, DeepSpeed, Accelerate and vLLM configs and fail if it "
              "will not fit", _check_options),
    "estimate": ("per-GPU peak of a training step or an inference forward, no config file", _estimate_options),
    "plan": ("list the training setups that fit, best first (for a recipe: the edits to it)", _plan_options),
    "model": ("what is in a model: parameters, layers, KV cache bytes per token", _model_options),
    "rule": ("explain a rule (or list them all)", _rule_options),
    "models": ("list the offline model catalog", None),
    "gpus": ("list the GPU catalog with the memory their drivers report", None),
}


def _check(args: argparse.Namespace) -> int:
    """Each file on its own: a file that cannot be read or checked is reported on stderr and the
    run goes on with the others; the exit code is the worst of them (2 > 1 > 0)."""
    _keep_replays()
    from vramlint.checker import Context, FileResult, check_file
    from vramlint.files import STDIN, expand
    from vramlint.repository import real
    from vramlint.reporters import REPORTERS, resolve_format
    from vramlint.selection import enabled, warned
    from vramlint.settings import load_settings, merge

    settings = load_settings(args.config)
    cli = vars(args)
    given = {k for k, v in cli.items() if v is not None and v is not False}
    left: list[str] = []
    files = expand(args.files, left)
    stdin = _stdin() if STDIN in files else None
    rules = enabled(merge(settings.for_file(None), cli))
    warned(merge(settings.for_file(None), cli))             # an unknown name fails before any file is read
    results, cluster, models, usage = [], None, {}, False
    run = frozenset(str(real(p)) for p in files if p != STDIN)
    for path in files:
        shown = (args.stdin_filename or STDIN) if path == STDIN else path
        values = merge(settings.for_file(shown), cli)
        try:
            model, cluster = _resolve(values, models, model_optional=True, gpus_optional=True)
            ctx = Context(cluster, values, frozenset(given | set(settings.override_for(shown))), model,
                          values["near_threshold"], _size(values.get("host_ram")), values.get("kind"), run,
                          rules=enabled(values) if settings.override_for(shown) else rules, warn=warned(values))
            results.extend(check_file(shown, ctx, text=stdin if path == STDIN else None))
        except UsageError as exc:
            if len(files) == 1:
                raise
            print(f"vramlint: error: {exc}", file=sys.stderr)
            results.append(FileResult(shown, notes=[f"not checked: {exc}"], cluster=cluster))
            usage = True
    values = merge(settings.for_file(None), cli)
    results.extend(_unread(results, left, rules))
    failing = SEVERITY_RANK["warning" if values["strict"] else "error"]
    failed = any(SEVERITY_RANK[f.severity] >= failing for r in results for f in r.findings)
    REPORTERS[resolve_format(values["format"])](results, sys.stdout, _verbosity(values))
    return EXIT_USAGE if usage else EXIT_FINDINGS if failed else EXIT_OK


def _unread(results: list, left: list[str], rules: frozenset[str] | None) -> list:
    """A walk that estimated no job beside Python configs says what it left unread (VL012), as
    one more result for the run's report: the jobs are likely stated there."""
    from vramlint.checker import ESTIMATED, FileResult
    from vramlint.documents import Location
    from vramlint.rules.inputs import launches_not_read
    if not left or any(r.status == ESTIMATED for r in results):
        return []
    finding = launches_not_read(Location(left[0]), left)        # at the first of them: a file annotations can show
    return [FileResult(finding.location.path, findings=[finding] if rules is None or finding.code in rules else [],
                       notes=[f"{len(left)} Python config(s) not read"])]


def _stdin() -> str:
    """Standard input, as much of it as a config may be (``documents.MOST_BYTES``)."""
    from vramlint.documents import MOST_BYTES
    data = sys.stdin.buffer.read(MOST_BYTES + 1)
    if len(data) > MOST_BYTES:
        raise UsageError(f"standard input is larger than {MOST_BYTES // 2**20} MiB: not a config file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"standard input is not UTF-8 text ({exc.reason})") from None


def _verbosity(values: dict) -> str:
    return "quiet" if values.get("quiet") else "verbose" if values.get("verbose") else "normal"


def _resolve(values: dict, models: dict | None = None, model_optional: bool = False, gpus_optional: bool = False):
    """The model and GPUs a file is checked against, from flags or settings; ``models`` caches
    model shapes across the files of one run. ``check`` may leave the model to the file (vLLM
    configs name theirs) and the GPUs to a task spec that states them (SkyPilot, dstack: a
    file of another kind without them is a usage error of its own)."""
    from vramlint.hardware import parse_gpus
    from vramlint.models import read_model
    for key in ("gpus", "model"):
        if not values.get(key) and not (key == "model" and model_optional) and not (key == "gpus" and gpus_optional):
            raise UsageError(f"--{key} not given and no {key} in [tool.vramlint] of pyproject.toml")
    cluster = parse_gpus(values["gpus"]) if values.get("gpus") else None
    if not values.get("model"):
        return None, cluster
    models = {} if models is None else models
    if values["model"] not in models:
        models[values["model"]] = read_model(values["model"], download=bool(values.get("download")))
    return models[values["model"]], cluster


def _size(text: str | None) -> int | None:
    from vramlint.units import parse_size
    if not text:
        return None
    size = parse_size(str(text))
    if size is None:
        raise UsageError(f"cannot read host RAM {text!r}: give a size such as 512GB, 1TB or 768GiB")
    return size


def _flags(values: dict):
    from vramlint.plan import Flags, workload_from_flags
    precision = {"no": "fp32"}.get(values.get("mixed_precision"), values.get("mixed_precision"))
    return Flags(micro_batch=values.get("micro_batch"), seq_len=values.get("seq_len"),
                 grad_accum=values.get("grad_accum"), precision=precision, zero_stage=values.get("zero_stage"),
                 grad_checkpointing=bool(values.get("grad_checkpointing")), workload=workload_from_flags(values))


def _estimate(args: argparse.Namespace) -> int:
    _keep_replays()
    from vramlint.memory import estimate
    from vramlint.plan import plan_from_flags
    from vramlint.reporters import ESTIMATE_REPORTERS
    from vramlint.settings import load_settings, merge

    values = merge(load_settings(args.config).for_file(None), vars(args))
    model, cluster = _resolve(values)
    plan = _stacked(plan_from_flags(model, cluster, values), values)
    ESTIMATE_REPORTERS[args.format](plan, estimate(plan), sys.stdout)
    return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    _keep_replays()
    import json

    from vramlint.memory.fit import setup_edits, training_setups
    from vramlint.plan import plan_from_flags
    from vramlint.settings import load_settings, merge
    from vramlint.units import GiB

    settings = load_settings(args.config)
    values = merge(settings.for_file(args.recipe), vars(args))
    if args.recipe:
        stated = {k for k, v in vars(args).items() if v is not None and v is not False and k != "recipe"}
        base, where = _recipe_plan(args.recipe, values, stated | set(settings.override_for(args.recipe))), args.recipe
    else:
        model, cluster = _resolve(values)
        base, where = _stacked(plan_from_flags(model, cluster, {**values, "train": True}), values), None
    cluster = base.cluster
    threshold = values.get("near_threshold") or 0.90
    setups = training_setups(base, int(cluster.gpu.memory_bytes * threshold))
    if args.format == "json":
        json.dump([{"runtime": s.runtime, "strategy": s.strategy, "offload": s.offload,
                    "grad_checkpointing": s.grad_checkpointing, "max_micro_batch": s.micro_batch,
                    "per_gpu_peak_bytes": s.peak, **({"edits": setup_edits(base, s)} if where else {})}
                   for s in setups], sys.stdout, indent=2)
        print()
        return EXIT_OK
    what = f"{where} ({base.model.name or base.model.model_type})" if where else base.model.name or base.model.model_type
    print(f"Training {what} on {cluster.describe()}, seq {base.seq_len}: "
          f"{len(setups)} setups stay under {threshold:.0%} of GPU memory, best first")
    for s in setups:
        if where:
            print(f"  {s.peak / GiB:6.1f} GiB  {'; '.join(setup_edits(base, s)) or 'as written'}")
            continue
        print(f"  {s.strategy:<22} offload {s.offload:<24} checkpointing {'on ' if s.grad_checkpointing else 'off'}  "
              f"micro-batch <= {s.micro_batch:<3} peak {s.peak / GiB:6.1f} GiB")
    if not setups and base.parallelism is not None:      # a pretraining framework's own layouts were weighed
        print("  none of its layouts: more GPUs, or a smaller model, micro-batch or sequence")
    elif not setups:
        print("  none: more GPUs, tensor parallelism, LoRA/QLoRA (--lora-rank, --load-in-4bit) or a shorter sequence")
    return EXIT_OK


def _stacked(plan, values: dict):
    """A plan from flags as the stack of the repository it runs in would run it (``check`` does
    this per file), what the stack does not model said beside it."""
    from vramlint.stack import plan_for_stack, stack_for, unmodelled
    stack = stack_for(values)
    plan = plan_for_stack(plan, stack)
    said = tuple(why for package in ("transformers", "bitsandbytes") if (why := unmodelled(stack, package)))
    return plan.with_changes(assumptions=plan.assumptions + said)


def _recipe_plan(path: str, values: dict, stated: set[str]):
    """The job a training recipe describes, as ``check`` reads it (its DeepSpeed file included)."""
    from vramlint.checker import Context, check_file
    from vramlint.hardware import parse_gpus
    from vramlint.readers.registry import RECIPES
    from vramlint.repository import real
    if not values.get("gpus"):
        raise UsageError("--gpus not given and no gpus in [tool.vramlint] of pyproject.toml")
    model, _ = _resolve({**values, "gpus": values["gpus"]}, model_optional=True)
    ctx = Context(parse_gpus(values["gpus"]), values, frozenset(stated), model,
                  run_paths=frozenset({str(real(path))}))
    result = check_file(path, ctx)[0]
    if result.plan is None or result.kind not in RECIPES:
        why = "; ".join([f.message for f in result.findings if f.severity != "info"] + result.notes) or "no estimate"
        raise UsageError(f"{path}: not a training recipe vramlint can plan ({why})")
    return result.plan


def _model(args: argparse.Namespace) -> int:
    from vramlint.models import read_model
    from vramlint.reporters import MODEL_REPORTERS
    MODEL_REPORTERS[args.format](read_model(args.model, args.revision, args.download), sys.stdout)
    return EXIT_OK


def _rule(args: argparse.Namespace) -> int:
    """``vramlint rule VL201``: the rule's documentation, from the registry shipped in the wheel."""
    from vramlint.rules import RULES
    from vramlint.selection import rules_named
    codes = sorted(rules_named([args.code], "rule")) if args.code else list(RULES)
    for code in codes:
        rule = RULES[code]
        if not args.code:
            print(f"{code}  {rule.name:<34} {rule.severity:<8} {rule.summary.split('.')[0]}")
            continue
        print(f"{code} {rule.name} ({rule.severity})\n\n{rule.summary}\n\nBad:\n\n{_indent(rule.bad)}\n\n"
              f"Good:\n\n{_indent(rule.good)}\n")
    return EXIT_OK


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _models(_: argparse.Namespace) -> int:
    from vramlint.models.catalog import entries
    for entry in entries():
        print(f"{entry['id']:<50} {entry['short']:<30} {entry['params'] / 1e9:>9.2f}B")
        for alias in entry.get("aliases", ()):
            print(f"  {alias:<48} (same architecture)")
    return EXIT_OK


def _gpus(_: argparse.Namespace) -> int:
    from vramlint.hardware import GPUS
    from vramlint.units import GiB
    for gpu in GPUS:
        aliases = ", ".join(gpu.aliases)
        print(f"{gpu.name:<14} {gpu.memory_bytes / GiB:>7.2f} GiB  {aliases:<40} {gpu.source}")
    return EXIT_OK


COMMANDS = {"check": _check, "estimate": _estimate, "plan": _plan, "model": _model, "models": _models,
            "gpus": _gpus, "rule": _rule}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Options anywhere among the files (``check a.json --format json b.json``), as linters take them."""
    words = list(sys.argv[1:] if argv is None else argv)
    named = next((w for w in words if not w.startswith("-")), None)
    parser = _parser(named if named in SUBCOMMANDS else None)
    args, rest = parser.parse_known_args(argv)
    unknown = [word for word in rest if word.startswith("-") and word != "-"]
    if rest and (args.command != "check" or unknown):
        parser.error(f"unrecognized arguments: {' '.join(unknown or rest)}")
    if rest:
        args.files = [*args.files, *rest]
    return args


def _closed_pipe() -> int:
    """The reader went away (``| head``): what it read was enough, as ripgrep takes it: exit 0
    and no traceback at exit (rich's own handler would exit 1)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_OK


def _lenient_streams() -> None:
    """A stream that cannot encode a character (a Windows pipe in cp1252) gets an escape for it,
    not an exception: config text and a model's name may hold any character."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.encoding or "").lower().replace("-", "") != "utf8":
            stream.reconfigure(errors="backslashreplace")


def _unwritable(exc: OSError | None) -> int:
    """Standard output closed at start, or a write to it failed (a full disk, ``> /dev/full``):
    one line on standard error, exit 2, and nothing left for the interpreter's final flush to
    fail on (it would print a traceback and exit 120)."""
    why = "standard output is closed" if exc is None else f"cannot write the output ({exc.strerror or exc})"
    if sys.stderr is not None:
        print(f"vramlint: error: {why}", file=sys.stderr)
    try:                                      # closed (None): nothing is left to flush at exit
        real = sys.stdout is not None and sys.stdout.fileno() == 1
    except (OSError, ValueError, AttributeError):
        real = False                          # a stream of the caller's (a test's buffer): theirs to close
    if real:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        except OSError:
            pass
        sys.stdout = open(os.devnull, "w")   # noqa: SIM115 - the process's stdout from here on
    return EXIT_USAGE


def _keep_replays() -> None:
    """Replays kept between runs (``vramlint.cache.Replays``): the command line's choice, so the
    memory model itself reads and writes no file."""
    from vramlint.cache import Replays
    from vramlint.memory import reserve
    if reserve.STORE is None:
        reserve.STORE = Replays()


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdout is None:
        return _unwritable(None)
    _lenient_streams()
    args = _parse(argv)
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()
        return code
    except UsageError as exc:
        print(f"vramlint: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG,
                                                      errno.EDQUOT):
            return _unwritable(exc)
        if os.environ.get("VRAMLINT_DEBUG"):
            raise
        print(f"vramlint: internal error: {type(exc).__name__}: {exc} (VRAMLINT_DEBUG=1 shows where)",
              file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
