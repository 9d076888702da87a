"""A shell or sbatch script: the ``#SBATCH`` request, and each job its commands start read as the
same keys written in a recipe or a ``vllm serve --config`` file (``readers/launch.py``), then
checked as that kind is (one job, two ways, one answer); a script that hands its job to another
(``sbatch job.slurm``, ``srun ./train.sh``) is checked through it."""

from __future__ import annotations

from dataclasses import replace

from vramlint.documents import Document, Location, ParseError, read_text
from vramlint.errors import UsageError
from vramlint.findings import WARNING
from vramlint.hardware import Cluster
from vramlint.jobs import check_document
from vramlint.jobs.gpus import stated_cluster
from vramlint.jobs.inputs import load
from vramlint.jobs.result import NO_GPUS, Context, FileResult
from vramlint.readers import SCRIPT_KIND
from vramlint.readers.deepspeed import Fact
from vramlint.readers.launch import (ACCELERATE_LAUNCHERS, RAY_COUNTS, RECIPE_COUNTS, SERVING, Launch,
                                     accelerate_settings, arguments_data, launches, sbatch_options, slurm_variables,
                                     stated_gpus, submitted, submitted_unknown, trains)
from vramlint.readers.registry import RECIPES, detect
from vramlint.readers.openrlhf_ppo import matters as openrlhf_matters
from vramlint.readers.verl import matters as verl_matters
from vramlint.readers.shell import Word, read_script, sbatch_lines
from vramlint.repository import find_referenced, real, root_of, shown
from vramlint.rules.inputs import not_estimated
from vramlint.rules.launch import missing_reference
from vramlint.rules.scripts import gpus_contradict, sbatch_variable, value_unknown
from vramlint.schemas import load_schema
from vramlint.shipped import shipped_copy


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A shell or sbatch script (``document.text``; it has no data): its ``#SBATCH`` request and
    the jobs its commands start."""
    if ctx.cluster is None:
        raise UsageError(NO_GPUS)
    result.kind, text = SCRIPT_KIND, document.text
    lines = sbatch_lines(text)
    options = sbatch_options(lines)
    script = read_script(text, result.path, known=slurm_variables(options), sourced=sourced_by(result.path))
    out = check_commands(script.commands, text, result, ctx, options)
    if not any(one.job for one in out):
        out[0].findings.extend(_untaken(launch, result.path) for launch in launches(script.untaken))
    out[0].findings.extend(sbatch_variable(result.path, option, line) for option, line in lines if "$" in option)
    return out


def sourced_by(path: str):
    """The text of a file the script at ``path`` sources (``source conf/arguments.sh``), found as
    a file it names is (repository.find_referenced: the working directory, the script's folder and
    those above it), inside the script's repository: a machine's own files (``source ~/.bashrc``,
    ``/opt/conda/etc/profile.d/conda.sh``) would make the answer this machine's, not the files'. None
    where there is none, or it cannot be read as text."""
    root = real(root_of(path))

    def text_of(name: str) -> str | None:
        found = find_referenced(name, path)
        if found is None or not real(found).is_relative_to(root):
            return None
        try:
            return read_text(found)
        except (OSError, ParseError):
            return None
    return text_of


def check_commands(commands: list, text: str, result: FileResult, ctx: Context, options: dict) -> list[FileResult]:
    """One result per job the commands start; the script's own result, skipped, where none."""
    out = []
    for launch in launches(commands):
        one = FileResult(result.path, kind=SCRIPT_KIND, via=f"{launch.launcher}, line {launch.line}",
                         cluster=ctx.cluster, job=True, notes=list(result.notes), gpus_from=result.gpus_from)
        if launch.kind == SERVING:
            out += [one] if _check_serving_launch(launch, text, one, ctx, options) else []
        else:
            out += _check_training_launch(launch, text, one, ctx, options)
    if out:
        out[0].findings[:0] = result.findings       # what the file itself says (a task's GPUs) goes with its first job
        return out
    handed = [found for name in dict.fromkeys(submitted(commands))
              if (found := find_referenced(name, result.path)) is not None and real(found) != real(result.path)]
    elsewhere = [target for target in handed if str(real(target)) not in ctx.run_paths]
    if elsewhere:                       # this run does not check them: they are checked here, as this file's
        return _handed_to(elsewhere, result, ctx)
    missing = [(name, command.line) for command in commands for name in submitted([command])
               if find_referenced(name, result.path) is None]
    unnamed = submitted_unknown(commands)
    if (missing or unnamed) and not handed:
        return [_handed_elsewhere(missing, result, unnamed)]
    result.job = False
    result.skip(f"hands its job to {', '.join(shown(t) for t in handed)}, checked in this run: skipped" if handed
                else "starts no training or serving job (torchrun, accelerate launch, deepspeed, python, "
                "llamafactory-cli, tune, axolotl, vllm serve): skipped")
    return [result]


def _untaken(launch: Launch, path: str):
    """A job in a branch the script's own values do not take (``[ "$MODE" = train ]`` after
    ``MODE=${MODE:-eval}``): it runs when the environment sets them otherwise, so the script that
    starts no job with its defaults does not pass without a word (VL011 at warning severity)."""
    finding = not_estimated(Location(path, "$", launch.line, 1), f"line {launch.line} starts a job ({launch.launcher}) "
                            "only in a branch the script's own values do not take: not checked",
                            "set the values that take that branch in the script, or check it as a file of its own")
    return replace(finding, severity=WARNING)


def _handed_elsewhere(missing: list[tuple[str, int]], result: FileResult,
                      unnamed: list[tuple[str, int]] = ()) -> FileResult:
    """A script whose only commands hand work to scripts this repository does not hold (a README's
    ``bash train_grpo.sh --model_name ...``, a workflow's ``bash clean-up.sh``), or to a script only
    the run names (``srun ... bash ${1}``): whether they start a job is not known here, so each is a
    warning at its line (VL011 at warning severity), not a silent skip and not an error for what may
    be a clean-up script."""
    for name, line in missing:
        finding = not_estimated(Location(result.path, "$", line, 1), f"line {line} hands its work to {name}, "
                                "which is not in this repository: a job it starts is not checked",
                                f"check {name} where it is, or add it here")
        result.findings.append(replace(finding, severity=WARNING))
    for name, line in unnamed:
        finding = not_estimated(Location(result.path, "$", line, 1), f"line {line} hands its work to {name}, a "
                                "script only the run names: a job it starts is not checked",
                                "check the script it runs with vramlint, where it is")
        result.findings.append(replace(finding, severity=WARNING))
    result.job = False
    names = [name for name, _ in missing] + [name for name, _ in unnamed]
    where = "not in this repository" if not unnamed else "not here"
    result.skip(f"hands its work to {', '.join(names)}, {where}: not checked")
    return result


def _handed_to(scripts: list, result: FileResult, ctx: Context) -> list[FileResult]:
    """A script that hands its job to others (``sbatch job.slurm``, ``srun ./train.sh``) that this
    run does not check: their jobs are checked here, so the file that starts them does not pass
    unexamined (each once: the scripts already on the way are not followed again)."""
    ctx = replace(ctx, run_paths=ctx.run_paths | {str(real(result.path))} | {str(real(s)) for s in scripts})
    out = []
    for target in scripts:
        name = shown(target)
        for one in check(Document(name, read_text(target), None), FileResult(name, cluster=ctx.cluster), ctx):
            one.via = f"handed by {result.path}" + (f", {one.via}" if one.via else "")
            out.append(one)
    return out


def _count_unknown(launch: Launch, one: FileResult, ctx: Context, word: Word, what: str) -> Cluster | None:
    """A launch whose GPU count only the run knows (``word``): on the ``--gpus`` count where the
    command line gives one (VL014 says so), else not estimated (VL011)."""
    path = one.path
    if ctx.cluster.counted:
        one.findings.append(value_unknown(path, what, word, f"checked on {ctx.cluster.describe()} (--gpus)"))
        return ctx.cluster
    one.findings.append(value_unknown(path, what, word, "no estimate without a count"))
    one.findings.append(not_estimated(Location(path, "$", word.line, word.column),
                                      f"the launch at line {launch.line} runs on a GPU count only the run knows",
                                      f"give the count, e.g. --gpus 8x{ctx.cluster.gpu.name} (GPUs per node; "
                                      f"NODESx8x{ctx.cluster.gpu.name} for several nodes), or gpus for this "
                                      "file in [[tool.vramlint.overrides]]"))
    one.unplanned("the GPU count is not stated")
    return None


def _launch_cluster(launch: Launch, one: FileResult, ctx: Context, options: dict,
                    config_counts: bool = False) -> Cluster | None:
    """The GPUs a launch runs on: the count it states (``--gpus`` naming the type), the command
    line's where it states one, else none (VL011: the count is the run's to know)."""
    path = one.path
    stated = stated_gpus(launch, options)
    one.findings.extend(gpus_contradict(path, word, message) for word, message in stated.conflicts)
    if stated.per_node is None:
        if config_counts and stated.unknown is None:
            return ctx.cluster               # the Accelerate config file it names says (its num_processes)
        word = stated.unknown or Word(None, launch.line, 1, unknown="not stated")
        return _count_unknown(launch, one, ctx, word, "the GPU count per node")
    at = stated.per_node_at or Word(None, launch.line, 1)
    if stated.nodes_at is not None and stated.nodes_at.text is None:
        one.findings.append(value_unknown(path, "the node count", stated.nodes_at, "checked on 1 node"))
    one.notes.append(f"GPUs: {stated.per_node} per node x {stated.nodes} node(s), from {stated.by} at line {at.line}")
    if one.gpus_from is not None and ctx.cluster.counted:      # a task spec's resources say: the launch runs on them
        if stated.per_node > ctx.cluster.per_node:
            one.findings.append(gpus_contradict(path, at, f"{stated.by} {stated.per_node} but the task gives "
                                                          f"{ctx.cluster.per_node} GPU(s) per node ({one.gpus_from}): "
                                                          "processes past them fail at torch.cuda.set_device"))
        return ctx.cluster
    return stated_cluster(ctx, one, stated.per_node, stated.nodes, Location(path, "$", at.line, at.column), stated.by)


def _check_training_launch(launch: Launch, text: str, one: FileResult, ctx: Context,
                           options: dict) -> list[FileResult]:
    """A training launch: the program's arguments (over the recipe file it parses first, where it
    names one) read as the same keys in a recipe; the Accelerate config it launches with stands in
    as ``--launch-config`` does. Its results: ``one``, and one more for each other GPU group the
    job trains on (``Recipe.groups``); none where the command is no training job (a download script)."""
    path = one.path
    if launch.unread:
        return [one] if _unread_launch(launch, one) else []
    data, positions, unknown = arguments_data(launch)
    document = _over_file(launch, text, one, data, positions)
    if not isinstance(document, Document):
        return [one] if document else []
    document = replace(document, unknown=frozenset(key for key, _ in unknown))
    kind = launch.reads_as or detect(document.data)      # the program says (TRL, OpenRLHF), else its keys do
    if kind not in RECIPES:
        if not trains(launch):
            return []                     # python setup.py, a download script: not a job
        program = launch.program.text if launch.program is not None else launch.launcher
        _unread_launch(replace(launch, unread=f"{program} gets arguments that are no recipe vramlint reads"), one)
        return [one]
    values = dict(ctx.values)
    config = launch.options.get("config_file")
    if launch.launcher in ACCELERATE_LAUNCHERS and config is not None and config.text:
        found = _accelerate_config(launch, config.text, path)
        if found is None:
            one.findings.append(missing_reference(Location(path, "$", config.line, config.column), config.text,
                                                  key="--config_file"))
            return [one]
        values["launch_config"], read = found
        one.reads.append(read)
    for key, value, word in accelerate_settings(launch):        # accelerate's own flags, as the Trainer gets them
        if key not in document.data and not (key == "deepspeed" and "fsdp" in document.data):
            document.data[key] = value
            document.positions[f"$.{key}"] = (word.line, word.column)
            document.elsewhere[f"$.{key}"] = path
    counts = (launch.per_node_by, RECIPE_COUNTS[launch.per_node_by]) if launch.per_node_by in RECIPE_COUNTS else ()
    for key, word in unknown:
        if key in counts or (kind == "verl" and not verl_matters(key)) \
                or (launch.per_node_by in RAY_COUNTS and not openrlhf_matters(key)):
            continue                                # the GPU count (_recipe_cluster says), or a key of no memory
        one.findings.append(value_unknown(path, key if kind == "verl" else f"--{key}", word,
                                          "the estimate takes the default or the flag that states it"))
    if counts:
        cluster, ctx = _recipe_cluster(launch, one, ctx, options)
    else:
        cluster = _launch_cluster(launch, one, ctx, options, config_counts="launch_config" in values)
    if cluster is None:
        return [one]
    trainer = launch.trainer
    stage = Fact(trainer.text, Location(path, "$", trainer.line, trainer.column)) if trainer is not None else None
    results = check_document(document, one, replace(ctx, cluster=cluster, values=values, kind=kind, trainer=stage,
                                                    from_launch=True))
    return results if any(r is one for r in results) else [one]


def _recipe_cluster(launch: Launch, one: FileResult, ctx: Context, options: dict) -> tuple[Cluster | None, Context]:
    """A launch whose job states its own GPUs (verl's ``trainer.n_gpus_per_node`` x ``trainer.nnodes``,
    OpenRLHF PPO's ``--actor.num_gpus_per_node`` x ``--actor.num_nodes``) runs on them, sized by
    ``jobs.gpus.recipe_size`` (the framework's defaults where unset); a count past the visible GPUs
    is VL315 as for any launch; where the line sets the count to what only the run knows, on the
    ``--gpus`` count (VL011 without one)."""
    stated = stated_gpus(launch, options)
    one.findings.extend(gpus_contradict(one.path, word, message) for word, message in stated.conflicts)
    words = {launch.per_node_by: "the GPU count per node", RECIPE_COUNTS[launch.per_node_by]: "the node count"}
    unknown = [(key, word) for key, word, _ in launch.arguments if key in words and word is not None
               and word.text is None]
    if not unknown:
        return ctx.cluster, ctx
    cluster = _count_unknown(launch, one, ctx, unknown[0][1], words[unknown[0][0]])
    return cluster, replace(ctx, stated=ctx.stated | {"gpus"})


def _over_file(launch: Launch, text: str, one: FileResult, data: dict, positions: dict) -> Document | bool:
    """The program's arguments over the file it reads first (a recipe, SGLang's ``--config``), each
    value where it is written; the line's alone where it names none. True where that file cannot be
    read (its finding is made), after which there is nothing to estimate."""
    path, recipe = one.path, launch.recipe
    if recipe is None:                      # what no argument states is the launch line's to answer for
        return Document(path, text, data, {"$": (launch.line, 1), **positions}, on_command_line=True)
    if recipe.text is None:
        one.findings.append(value_unknown(path, "the recipe file", recipe, "no estimate without it"))
        return _unread_launch(replace(launch, unread="the recipe file it runs is known only when it runs"), one)
    target = find_referenced(recipe.text, path)
    if target is None:
        one.findings.append(missing_reference(Location(path, "$", recipe.line, recipe.column), recipe.text,
                                              key="the recipe file"))
        return True
    base = load(str(target), one)
    if base is None or not isinstance(base.data, dict):
        return True
    one.reads.append(shown(target))
    return Document(shown(target), base.text, {**base.data, **data}, {**base.positions, **positions},
                    list(base.lenient), {key: path for key in positions})


def _accelerate_config(launch: Launch, written: str, path: str) -> tuple[str, str] | None:
    """The Accelerate config a launch names, as (what ``launch_config`` resolves, what the result
    says it read): a file of the repository, or (``trl --accelerate_config zero3``) one TRL ships,
    read from its own copy (``shipped``)."""
    found = find_referenced(written, path)
    if found is not None:
        return shown(found), shown(found)
    if launch.launcher == "trl" and "/" not in written and not written.endswith((".yaml", ".yml")):
        name = f"accelerate_configs/{written}.yaml"
        copy = shipped_copy(name)
        return (name, copy[0]) if copy is not None else None
    return None


def _unread_launch(launch: Launch, one: FileResult) -> bool:
    """A launch that starts a job vramlint cannot read: not estimated (VL011), never skipped."""
    who = "the command" if launch.launcher == "?" else launch.launcher
    what = f" ({launch.program.text})" if launch.launcher == "?" and launch.program is not None else ""
    one.findings.append(not_estimated(Location(one.path, "$", launch.line, 1),
                                      f"{who} at line {launch.line}{what} starts a job vramlint does not read: "
                                      f"{launch.unread}", "check the recipe or config file it runs, or vramlint "
                                      "estimate with the same arguments; --warn VL011 reports this as a warning"))
    one.unplanned(launch.unread)
    return True


def _check_serving_launch(launch: Launch, text: str, one: FileResult, ctx: Context, options: dict) -> bool:
    """``vllm serve``: its arguments read as the same keys in a ``vllm serve --config`` file;
    ``sglang.launch_server`` / ``sglang serve``: its flags over the ``--config`` YAML it reads."""
    kind = launch.reads_as or "vllm"
    engine = "SGLang" if kind == "sglang" else "vLLM"
    data, positions, unknown = arguments_data(launch)
    for key, word in unknown:
        one.findings.append(value_unknown(one.path, f"--{key}", word, f"the estimate takes {engine}'s default"))
    for key, value, whose in launch.defaults:     # unplaced: findings point at a key the line writes
        data.setdefault(key, value)
        one.notes.append(f"{key} {value}: {whose}")
    if kind == "vllm":
        document = Document(one.path, text, _as_vllm_parses(data), {"$": (launch.line, 1), **positions})
    else:
        document = _over_file(launch, text, one, data, positions)
        if not isinstance(document, Document):
            return True
    stated = stated_gpus(launch, options)
    one.findings.extend(gpus_contradict(one.path, word, message) for word, message in stated.conflicts)
    cluster = ctx.cluster
    if stated.per_node is not None and not (one.gpus_from is not None and ctx.cluster.counted):
        at = stated.per_node_at
        cluster = stated_cluster(ctx, one, stated.per_node, stated.nodes, Location(one.path, "$", at.line, at.column),
                                  stated.by)
    check_document(document, one, replace(ctx, cluster=cluster, kind=kind))
    return True


def _as_vllm_parses(data: dict) -> dict:
    """Command-line values as vLLM's argument parser types them: a string option stays a string
    (``--api-key 123``), whatever it looks like (the types are the schema's, from vLLM's own)."""
    properties = load_schema("vllm").get("properties", {})
    out = {}
    for key, value in data.items():
        spec = properties.get(key.replace("-", "_"), {})
        if spec.get("type") == "string" and not isinstance(value, str):
            value = str(value) if not isinstance(value, bool) else value
        out[key] = value
    return out
