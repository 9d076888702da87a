"""Launch commands: which job a shell or sbatch script starts, on how many GPUs, with which files.

A launcher's own options are told apart from the program's by each launcher's own rules (the
options that take a value, read from its argument parser at a named release), and what the
program gets is read as the ``--key value`` arguments ``HfArgumentParser`` takes (``--key=value``,
a bare ``--flag`` for True, a positional YAML or JSON file it parses first). Each job becomes a
:class:`Launch`: the GPUs it states per node and the nodes (each with the word that states it),
the config files it names, and the program's arguments with their positions in the script, so the
checker reads them as it reads the same keys written in a recipe (one job, two ways, one answer).

Launchers, and the release whose parser their options come from:
- ``torchrun`` / ``python -m torch.distributed.run`` (torch 2.13 ``torch/distributed/run.py``);
- ``accelerate launch`` (accelerate 1.16 ``commands/launch.py``);
- ``deepspeed`` (deepspeed 0.19.8 ``launcher/runner.py``);
- ``llamafactory-cli train`` (LLaMA-Factory 0.9.5 ``cli.py``: torchrun over every visible GPU
  when there are several, ``NPROC_PER_NODE`` / ``NNODES`` / ``FORCE_TORCHRUN``);
- ``trl sft|dpo|grpo|kto|reward|rloo|distillation`` (TRL 1.16 ``cli/``: ``accelerate launch`` of
  its own script, ``--config`` the recipe, ``--accelerate_config`` the Accelerate file);
- ``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server``;
- OpenRLHF's ``openrlhf.cli.train_sft|train_dpo|train_rm`` (0.11.2, and the flat flags up to 0.10.1),
  whose flags are the recipe (``readers/openrlhf.py``), and ``train_ppo_ray``, on the actor's GPUs its
  flags state (``readers/openrlhf_ppo.py``);
- ``python script.py`` (one process; one a task under ``srun``, one a rank under ``mpirun``), behind the
  wrappers readers/wrappers.py unwraps (``srun``, ``env``, ``nohup``, ``timeout``, ``nsys profile``,
  ``uv run``, ``apptainer exec``, MPI launchers).
Other frameworks' CLIs (``swift sft``, ``composer``, ...) and modules are jobs not read yet (VL011).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from vramlint.readers.shell import Command, Word
from vramlint.readers.wrappers import (IMAGE_ENTRYPOINT, MPI, after_equals, launcher_options, mpi_ranks, option_key,
                                       unwrapped)
from vramlint.readers.openrlhf import MARKS as OPENRLHF_MARKS, trainer_of
from vramlint.readers.megatron import BOOLEANS as MEGATRON_FLAGS, LISTS as MEGATRON_LISTS
from vramlint.readers.megatron import HYBRID as MEGATRON_HYBRID, PROGRAMS as MEGATRON_PROGRAMS
from vramlint.readers.sglang import key_of as sglang_key
from vramlint.readers.verl import PROGRAMS as VERL_PROGRAMS

PYTHONS = re.compile(r"^python(\d(\.\d+)?)?$")
TRAINING, SERVING = "training", "serving"
ONE_PROCESS = "a single python process"     # what states a plain ``python train.py``'s count (``_one_process``)


@dataclass(frozen=True)
class Launch:
    """One job a script starts: the launcher, what it runs, its GPUs and its arguments."""

    launcher: str                                   # torchrun, accelerate, deepspeed, python, llamafactory-cli, vllm
    kind: str                                       # training or serving
    command: Command
    program: Word | None = None                     # the script or module run (vLLM: the model)
    options: dict[str, Word | None] = field(default_factory=dict)     # the launcher's own
    arguments: tuple[tuple[str, Word | None, Word], ...] = ()         # (key, value or None for a bare flag, key word)
    positional: tuple[Word, ...] = ()               # the program's positional words (a recipe file)
    per_node: Word | None = None                    # processes per node as stated, and where
    per_node_by: str = ""                           # what states it: --nproc_per_node, CUDA_VISIBLE_DEVICES, ...
    nodes: Word | None = None
    total: bool = False                             # per_node holds the total over nodes (accelerate --num_processes)
    recipe: Word | None = None                      # the recipe file it runs, where the launcher names one
    distributed: bool = False                       # a launcher (or srun) starts it: a job, read or not
    unread: str = ""                                # a job vramlint does not read yet, and why
    trainer: Word | None = None                     # the trainer the launcher names (``trl dpo``): the recipe's stage
    reads_as: str = ""                              # the recipe format its arguments are, where the program says
    # (key, value, whose default) the program passes where the line is silent (``trl vllm-serve``)
    defaults: tuple[tuple[str, object, str], ...] = ()

    @property
    def line(self) -> int:
        return self.command.line


def launches(commands: list[Command]) -> list[Launch]:
    """The jobs the commands start, in order (commands that start none are left out)."""
    out = []
    for command in commands:
        launch = read_command(command)
        if launch is not None:
            out.append(launch)
    return out


# Jobs started through launchers vramlint does not read yet, by the module or command (issue 31:
# RL frameworks; issue 32: pretraining frameworks): they are jobs, never skipped as nothing.
UNREAD_MODULES = (("verl.", "verl (but verl.trainer.main_ppo)"),
                  ("openrlhf.", "OpenRLHF (but train_sft, train_dpo, train_rm, train_ppo_ray)"),
                  ("torchtitan.", "torchtitan (but its TOML job files, --job.config_file)"),
                  ("sglang.", "SGLang"), ("nanotron", "nanotron"), ("megatron", "Megatron"), ("olmo", "OLMo"),
                  ("swift.", "ms-swift"), ("xtuner.", "XTuner"))
UNREAD_SCRIPTS = (("pretrain_", "Megatron (but pretrain_gpt.py / pretrain_hybrid.py without --deepspeed)"),
                  ("run_train", "nanotron"))
# Megatron-Bridge's recipe scripts (examples/recipes/<family>/pretrain_<model>.py, finetune_<model>.py,
# scripts/training/run_recipe.py): a Python recipe function with overrides; the ConfigContainer YAML a
# run writes (run_config.yaml) is what vramlint reads (readers/megatron_bridge.py).
BRIDGE_RECIPES = re.compile(r"(^|/)recipes/[\w.-]+/(pretrain|finetune)_[\w.-]+\.py$|(^|/)run_recipe\.py$")
BRIDGE_UNREAD = ("Megatron-Bridge recipe script jobs are not read yet (the run_config.yaml a run writes, "
                 "its ConfigContainer, is)")
# Megatron-LM's MIMO programs (examples/mimo/train.py, ``-m examples.mimo.pretrain_mimo``): a vision or
# audio encoder beside the language model, on rank groups of their own (--encoder-tp, --llm-tp), over
# Megatron's flags that read as pretrain_gpt.py's would price the language model alone.
MIMO = re.compile(r"(^|[/.])mimo[/.]")
MIMO_UNREAD = "Megatron MIMO jobs (encoders beside the language model) are not read yet"
# Modules of those frameworks that start no GPU job: OpenRLHF's rule-based reward verifiers
# (``openrlhf.models.remote_rm.math_verifier``: an HTTP server that checks answers on the CPU).
NO_GPU_MODULES = ("openrlhf.models.remote_rm.",)




def _under_mpi(command: Command, words: list[Word]) -> Launch | None:
    """The job ``mpirun -np N -ppn M python train.py`` starts: the program's, on the ranks the launcher
    states (a one-process line's count is the launcher's: -ppn a node, else -np in all)."""
    total, per_node, rest = mpi_ranks(words)
    if not rest:
        return None
    launch = read_command(Command(tuple(rest), command.prefix, command.variables, command.line, command.under))
    if launch is None:
        return None
    name = words[0].text.rsplit("/", 1)[-1]
    if launch.per_node_by in ("", ONE_PROCESS):
        if per_node is not None:
            nodes = None
            if total is not None and (total.text or "").isdigit() and (per_node.text or "").isdigit() \
                    and int(per_node.text) > 0 and int(total.text) % int(per_node.text) == 0:
                nodes = Word(str(int(total.text) // int(per_node.text)), total.line, total.column)
            launch = replace(launch, per_node=per_node, per_node_by=f"{name}'s ranks a node", nodes=nodes,
                             total=False)
        elif total is not None:
            launch = replace(launch, per_node=total, per_node_by=f"{name} -np", nodes=None, total=True)
        else:
            launch = replace(launch, per_node=None, per_node_by="")
    return replace(launch, distributed=True)


def read_command(command: Command) -> Launch | None:
    words, prefix = list(command.words), dict(command.prefix)
    if words and (words[0].text or "").rsplit("/", 1)[-1] in MPI:
        return _under_mpi(command, words)
    srun = command.under == "srun" or (bool(words) and (words[0].text or "").rsplit("/", 1)[-1] == "srun")
    words = unwrapped(words, prefix)
    if not words:
        return None
    if words[0].text is None:
        script = _trainer_after(words)
        image = words[0].unknown.startswith(IMAGE_ENTRYPOINT)       # ``docker run --gpus all IMAGE``
        if srun or image or script is not None:   # ``${LAUNCH_SCRIPT} ${DIR}/finetune.py ...``: its launcher unknown
            known = "which only the image states" if image else "known only when it runs"
            return Launch("?", TRAINING, command, program=script, distributed=True,
                          unread=f"the command is {words[0].unknown or 'unknown'}, {known}")
        return None
    command = Command(tuple(words), prefix, command.variables, command.line, command.under)
    launch = _read(command, words)
    if launch is not None and srun and launch.per_node_by == ONE_PROCESS:
        # srun starts the program once a task: its processes are srun's tasks, which the #SBATCH request
        # or CUDA_VISIBLE_DEVICES state (stated_gpus), or only the run knows; not one
        launch = replace(launch, per_node=None, per_node_by="")
    if launch is not None and srun and not launch.distributed:
        launch = replace(launch, distributed=True)
    return launch


def _read(command: Command, words: list[Word]) -> Launch | None:
    name = words[0].text.rsplit("/", 1)[-1]
    rest = words[1:]
    if PYTHONS.match(name):
        rest = [w for w in rest if w.text not in ("-u", "-O", "-B")]
        if len(rest) >= 2 and rest[0].text == "-m":
            module = rest[1].text or ""
            if module in ("torch.distributed.run", "torch.distributed.launch"):
                return _torchrun(command, rest[2:])
            if module.startswith("vllm.entrypoints"):
                return _vllm(command, rest[2:], None)
            if module == "sglang.launch_server":
                return _sglang(command, rest[2:])
            if module == "accelerate.commands.launch":
                return _accelerate(command, rest[2:])
            if module.startswith("axolotl.cli.train"):
                return _axolotl(command, rest[2:])
            if module in VERL_PROGRAMS:
                return _verl(command, rest[1], rest[2:])
            if module == "trl.scripts.vllm_serve":        # what ``trl vllm-serve`` runs
                return _trl_vllm_serve(command, rest[1], rest[2:])
            return _program(command, "python", rest[1], rest[2:], _one_process(command))
        if rest and rest[0].text and rest[0].text.endswith(".py"):
            return _program(command, "python", rest[0], rest[1:], _one_process(command))
        script = _script_named(rest[0]) if rest else None
        if script is not None:            # ``python ${DIR}/pretrain_gpt.py``: the folder is the run's, the script known
            return _program(command, "python", script, rest[1:], _one_process(command))
        return None
    if name == "torchrun":
        return _torchrun(command, rest)
    if name == "accelerate" and rest and rest[0].text == "launch":
        return _accelerate(command, rest[1:])
    if name == "deepspeed":
        return _deepspeed(command, rest)
    if name == "llamafactory-cli" and rest and rest[0].text == "train":
        return _llamafactory(command, rest[1:])
    if name == "swift" and rest and rest[0].text in SWIFT_TRAINERS:
        return _swift(command, rest[0], rest[1:])
    if name == "vllm" and rest and rest[0].text == "serve":
        return _vllm(command, rest[2:], rest[1] if len(rest) > 1 else None)
    if name == "tune" and rest and rest[0].text == "run":
        return _tune(command, rest[1:])
    if name == "axolotl" and rest and rest[0].text == "train":
        return _axolotl(command, rest[1:])
    if name == "litgpt" and rest and rest[0].text in LITGPT_COMMANDS:
        return _litgpt(command, rest[0], rest[1:])
    if name == "trl" and rest and rest[0].text in TRL_TRAINERS:
        return _trl(command, rest[0], rest[1:])
    if name == "trl" and rest and rest[0].text == "vllm-serve":
        return _trl_vllm_serve(command, rest[0], rest[1:])
    if name == "sglang" and rest and rest[0].text == "serve":
        return _sglang(command, rest[1:])
    if name == "ray" and any(w.text == "submit" for w in rest[:2]) and any(w.text == "--" for w in rest):
        inner = rest[[w.text for w in rest].index("--") + 1:]      # ``ray job submit [options] -- COMMAND``
        if inner and inner[0].text is not None:
            launch = _read(Command(tuple(inner), command.prefix, command.variables, command.line, command.under), inner)
            if launch is not None:           # Ray places the processes: a python line's one process is not the count
                one = launch.per_node_by == ONE_PROCESS
                return replace(launch, distributed=True, per_node=None if one else launch.per_node,
                               per_node_by="" if one else launch.per_node_by)
    if name == "sglang" or (name == "ray" and any(w.text == "submit" for w in rest[:2])):
        return Launch(name, TRAINING, command, distributed=True, unread=f"{name} launches are not read yet")
    asks = bool(rest) and all(w.text in ("--help", "-h", "--version", "-V") for w in rest)      # no job: a question
    script = name != "composer" or any((w.text or "").endswith(".py") for w in rest)         # composer runs a script
    if name in UNREAD_CLIS and not asks and script and \
            (UNREAD_CLIS[name][1] is None or rest and rest[0].text in UNREAD_CLIS[name][1]):
        what, subcommands = UNREAD_CLIS[name]
        called = f"{name} {rest[0].text}" if subcommands is not None else name
        return Launch(name, TRAINING, command, distributed=True, unread=f"{what} jobs ({called}) are not read yet")
    return None


# Command-line tools of other frameworks whose subcommands start GPU jobs vramlint does not read yet
# (each a job, VL011, never a skip): ms-swift's ``swift`` and its Megatron front end ``megatron``
# (ms-swift 4.6.0 swift/cli/main.py:14-27 and _megatron/main.py:6-11 ROUTE_MAPPING, less merge-lora and
# web-ui), XTuner's ``xtuner train``, NeMo 2's ``nemo llm``, Oumi's CLI, LMDeploy's server, LLaMA-Factory's
# servers, and launchers whose every run is a job (None: any subcommand): MosaicML Composer's (LLM
# Foundry's train.py and YAML), ColossalAI's (its Booster plugins), Hugging Face TGI's, fairseq's.
UNREAD_CLIS = {
    "swift": ("ms-swift", {"rlhf", "infer", "deploy", "rollout", "sample", "app", "eval", "export"}),
    "megatron": ("ms-swift's Megatron", {"sft", "pt", "rlhf", "export"}),
    "xtuner": ("XTuner", {"train"}),
    "nemo": ("NeMo 2", {"llm", "vlm"}),
    "oumi": ("Oumi", {"train", "infer", "evaluate"}),
    "lmdeploy": ("LMDeploy", {"serve"}),
    "llamafactory-cli": ("LLaMA-Factory's inference", {"api", "chat", "webchat"}),
    "composer": ("Composer (LLM Foundry)", None),
    "colossalai": ("ColossalAI", {"run"}),
    "text-generation-launcher": ("Hugging Face TGI", None),
    "fairseq-train": ("fairseq", None),
    "fairseq-hydra-train": ("fairseq", None),
}


def _trainer_after(words: list[Word]) -> Word | None:
    """The training script a command whose first word only the run knows runs next (``$LAUNCHER
    train.py``, ``${LAUNCH_SCRIPT} ${SCRIPT_DIR}/finetune.py``): a ``.py`` file whose name says it
    trains, as the word after the unknown ones."""
    following = next((w for w in words[1:] if w.text is not None or _script_named(w) is not None), None)
    if following is None:
        return None
    if following.text is None:
        return _script_named(following)
    name = following.text.rsplit("/", 1)[-1]
    return following if name.endswith(".py") and _TRAINS.search(name) else None


def _script_named(word: Word) -> Word | None:
    """A script whose folder only the run knows (``${DIR}/pretrain_gpt.py``, ``$(pwd)/train.py``):
    the script's name, from the known piece the word ends with, where that names a ``.py`` file
    that trains (a data-preparation script in a folder only the run knows stays no launch)."""
    if word.text is not None or not word.parts or word.parts[-1].text is None:
        return None
    tail = word.parts[-1].text
    if not tail.startswith("/") or not tail.endswith(".py") or not _TRAINS.search(tail):
        return None
    return Word(tail.lstrip("/"), word.line, word.column)


def _values(words: list[Word], start: int) -> tuple[Word, int]:
    """An ``nargs='+'`` option's values (every word up to the next option) as one word, space-joined
    (unknown where one of them is), and the index after them."""
    end = start
    while end < len(words) and not (words[end].head or "").startswith("--"):
        end += 1
    taken = words[start:end]
    unknown = next((w.unknown for w in taken if w.text is None), "")
    text = None if unknown else " ".join(w.text for w in taken)
    return Word(text, taken[0].line, taken[0].column, unknown=unknown), end


def _arguments(words: list[Word], lists: frozenset[str] = frozenset()) -> tuple[tuple[tuple[str, Word | None, Word],
                                                                                      ...], tuple[Word, ...]]:
    """``HfArgumentParser``'s reading: ``--key value``, ``--key=value``, a bare ``--flag`` (True)
    where the next word is another option; positional words apart. An option in ``lists`` takes
    every word up to the next option (argparse's ``nargs='+'``)."""
    pairs, positional = [], []
    i = 0
    while i < len(words):
        word = words[i]
        text = word.head
        if text is not None and text.startswith("--") and len(text) > 2:
            key, eq, value = text[2:].partition("=")
            if eq:
                pairs.append((option_key(key), after_equals(word, value), word))
                i += 1
                continue
            following = words[i + 1] if i + 1 < len(words) else None
            if following is None or (following.text is not None and following.text.startswith("--")):
                pairs.append((option_key(key), None, word))
                i += 1
            elif option_key(key) in lists:
                value, i = _values(words, i + 1)
                pairs.append((option_key(key), value, word))
            else:
                pairs.append((option_key(key), following, word))
                i += 2
            continue
        positional.append(word)
        i += 1
    return tuple(pairs), tuple(positional)


def _visible(command: Command) -> Word | None:
    """``CUDA_VISIBLE_DEVICES`` as the command sees it: its own prefix, else an exported variable."""
    return command.prefix.get("CUDA_VISIBLE_DEVICES") or command.variables.get("CUDA_VISIBLE_DEVICES")


def visible_count(word: Word | None) -> int | None:
    """How many GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible (None where it is not known)."""
    if word is None or word.text is None:
        return None
    ids = [part for part in word.text.split(",") if part.strip()]
    return len(ids)


def _one_process(command: Command) -> tuple[Word | None, str]:
    """``python train.py``: one process, on one GPU (the first visible one)."""
    return Word("1", command.line, 1), ONE_PROCESS


def _program(command: Command, launcher: str, program: Word | None, words: list[Word],
             count: tuple[Word | None, str], options: dict | None = None, nodes: Word | None = None,
             total: bool = False) -> Launch:
    arguments, positional = _arguments(words, MEGATRON_LISTS if _megatron(program, ()) else frozenset())
    distributed = launcher != "python"
    unread = ""
    trainer, reads_as = _trl_script(program), "trl"
    if trainer is None:
        trainer, reads_as = _openrlhf_program(program, arguments), "openrlhf"
    if program is None or program.text is None:
        unread = f"the program it runs is {program.unknown if program else 'not named'}, known only when it runs"
    else:
        name = program.text.rsplit("/", 1)[-1].lower().removesuffix(".py").rsplit(".", 1)[-1]   # a module's too
        unread = "" if program.text.lower().startswith(NO_GPU_MODULES) else \
            BRIDGE_UNREAD if BRIDGE_RECIPES.search(program.text) else \
            MIMO_UNREAD if MIMO.search(program.text) else next(
            (f"{what} jobs are not read yet" for prefix, what in UNREAD_MODULES
             if program.text.lower().startswith(prefix)), "") or next(
            (f"{what} jobs are not read yet" for prefix, what in UNREAD_SCRIPTS if name.startswith(prefix)), "")
        distributed = distributed or bool(unread)
    recipe = recipe_word(positional)
    if trainer is not None and reads_as == "trl":   # TRL's own script: TrlParser reads --config, the trainer its name
        recipe = next((value for key, value, _ in arguments if key == "config"), recipe)
        arguments = tuple(a for a in arguments if a[0] != "config")
    if trainer is not None:
        unread = ""
    if _torchtitan_registry(program, arguments):     # torchtitan 0.3.0: --module / --config, the line over it
        return Launch(launcher, TRAINING, command, program, options or {}, _registry_flags(arguments, positional), (),
                      count[0], count[1], nodes, total, None, True, "", None, "torchtitan")
    job_file = _torchtitan_job(program, arguments)
    if job_file is not None:                 # torchtitan: --section.key arguments over the TOML job file
        return Launch(launcher, TRAINING, command, program, options or {}, _tyro_flags(arguments), positional,
                      count[0], count[1], nodes, total, job_file, True, "", None, "torchtitan")
    if _megatron(program, arguments):       # pretrain_gpt.py: its arguments are the job (readers/megatron.py)
        return Launch(launcher, TRAINING, command, program, options or {}, _bare_flags(arguments, MEGATRON_FLAGS),
                      positional, count[0], count[1], nodes, total, None, True, _unstated_hybrid(program, arguments),
                      None, "megatron")
    launch = Launch(launcher, TRAINING, command, program, options or {}, arguments, positional, count[0], count[1],
                    nodes, total, recipe, distributed, unread, trainer, reads_as if trainer is not None else "")
    return _ray_placement(launch) if trainer is not None and trainer.text == "ppo" else launch


TORCHTITAN_PROGRAMS = ("torchtitan.train", "torchtitan/train.py", "train.py")


def _torchtitan_job(program: Word | None, arguments: tuple) -> Word | None:
    """The TOML job file a torchtitan trainer reads (``-m torchtitan.train`` / ``train.py
    --job.config_file FILE``; run_train.sh's ``CONFIG_FILE``), or None for any other program."""
    text = (program.text or "") if program is not None else ""
    if not text.endswith(TORCHTITAN_PROGRAMS):
        return None
    return next((value for key, value, _ in arguments if key == "job.config_file"), None)


def _torchtitan_registry(program: Word | None, arguments: tuple) -> bool:
    """torchtitan 0.3.0's trainer, whose job is the config function ``--module M --config F`` name
    (torchtitan/config/manager.py:48-159; no TOML file any more)."""
    text = (program.text or "") if program is not None else ""
    return text.endswith(TORCHTITAN_PROGRAMS) and any(key in ("module", "config") for key, _, _ in arguments)


# tyro's subcommand for 0.3.0's activation checkpointing class (distributed/activation_checkpoint.py:332-337)
_AC_SUBCOMMAND = re.compile(r"activation[-_]checkpoint:(selective|full|memory[-_]budget|none)")


def _registry_flags(arguments: tuple, positional: tuple) -> tuple:
    """A torchtitan 0.3.0 line's arguments as tyro reads them: bare boolean flags, ``--section.no-field``
    for False, and the positional ``activation-checkpoint:full`` as the policy the job file would state."""
    from vramlint.readers.torchtitan import BOOLEANS
    flags = BOOLEANS | {f"no_{name}" for name in BOOLEANS}
    out, words = [], list(positional)
    for key, value, word in arguments:
        section, _, field = key.rpartition(".")
        negated = field.startswith("no_") and field[3:] in BOOLEANS
        if _bare(key, value, flags):
            words.append(value)              # a flag takes no value: the word after it is the line's next
            value = None
        if negated and value is None:
            out.append((f"{section}.{field[3:]}", Word("false", word.line, word.column), word))
            continue
        out.append((key, value, word))
    for word in words:
        match = _AC_SUBCOMMAND.fullmatch(word.text or "")
        if match:
            mode = Word(match.group(1).replace("-", "_"), word.line, word.column)
            out.append(("activation_checkpoint.mode", mode, word))
    return tuple(out)


def _tyro_flags(arguments: tuple) -> tuple:
    """torchtitan's arguments as tyro parses them: a boolean field is a bare flag
    (``--compile.enable "$@"``: the word after it is not its value), ``--job.config_file`` is the
    file the others are over."""
    from vramlint.readers.torchtitan import BOOLEANS
    return _bare_flags(tuple(a for a in arguments if a[0] != "job.config_file"), BOOLEANS)


def _bare_flags(arguments: tuple, flags: frozenset[str]) -> tuple:
    """A parser's boolean options as bare flags: the word after one is no value of it (an argparse
    ``store_true`` takes none; tyro's boolean fields are flags), unless it is a written true / false."""
    return tuple((key, None, word) if _bare(key, value, flags) else (key, value, word)
                 for key, value, word in arguments)


def _bare(key: str, value: Word | None, flags: frozenset[str]) -> bool:
    """Whether ``key`` is one of the parser's boolean ``flags`` written before a word that is no
    true / false of its own: that word is not its value."""
    return key.rsplit(".", 1)[-1] in flags and value is not None and (value.text or "").lower() not in (
        "true", "false")


def _unstated_hybrid(program: Word, arguments: tuple) -> str:
    """Why a hybrid-stack program's line is not read: its layers stated by no pattern (the deprecated
    ratios, or a checkpoint's arguments, decide them); "" where the line states one."""
    if not (program.text or "").endswith(("pretrain_hybrid.py", "pretrain_mamba.py")) or \
            any(key in MEGATRON_HYBRID for key, _, _ in arguments):
        return ""
    return (f"{program.text.rsplit('/', 1)[-1]} without --hybrid-layer-pattern: its layers (Mamba, attention, MLP) "
            "are stated by no argument the line gives")


def _megatron(program: Word | None, arguments: tuple) -> bool:
    """Megatron-LM's ``pretrain_gpt.py``, run by Megatron's own engine (Megatron-DeepSpeed's
    ``--deepspeed`` hands it to DeepSpeed's, which is not read: UNREAD_SCRIPTS says so)."""
    text = (program.text or "") if program is not None else ""
    return text.rsplit("/", 1)[-1] in MEGATRON_PROGRAMS and not any(key == "deepspeed" for key, _, _ in arguments)


# OpenRLHF's train_ppo_ray places its models on GPUs of Ray's, not of the launcher's: the actor's
# (on which its ZeRO shards, and under colocate_all every model) by these flags, dotted or flat.
RAY_COUNTS = {"actor.num_gpus_per_node": "actor.num_nodes", "actor_num_gpus_per_node": "actor_num_nodes"}


def _ray_placement(launch: Launch) -> Launch:
    """A ``train_ppo_ray`` line: one driver process, whose job runs on the actor's GPUs as its
    flags state them (OpenRLHF's defaults, 8 x 1, where they do not; ``jobs.gpus.recipe_size``)."""
    stated = {key: value for key, value, _ in launch.arguments}
    per_node = next((key for key in RAY_COUNTS if key in stated), "actor.num_gpus_per_node")
    return replace(launch, per_node=stated.get(per_node), per_node_by=per_node, nodes=stated.get(RAY_COUNTS[per_node]),
                   distributed=True)


_TRL_SCRIPT = re.compile(r"(?:^|/)trl/scripts/(\w+)\.py$|^trl\.scripts\.(\w+)$")


# A program whose file name says it trains (``train_gpt2.py``, ``finetune.py``, ``sft.py``) starts a
# job even when its arguments are none a recipe has: a one-process python run of it is judged (or
# said not to be), never taken for a download or setup script.
_TRAINS = re.compile(r"train|finetun|fine_tun|sft|dpo|grpo|(?<![a-z])ppo(?![a-z])", re.I)


def trains(launch: Launch) -> bool:
    """Whether the launch starts a job whatever its arguments: a launcher (or srun) starts it, or
    the program's file name says it trains."""
    name = (launch.program.text or "").rsplit("/", 1)[-1] if launch.program is not None else ""
    return launch.distributed or bool(_TRAINS.search(name))


def _trl_script(program: Word | None) -> Word | None:
    """The trainer of TRL's own script (``trl/scripts/dpo.py``, ``-m trl.scripts.dpo``): what ``trl
    dpo`` runs, so the same job launched either way reads the same."""
    found = _TRL_SCRIPT.search(program.text) if program is not None and program.text else None
    name = (found.group(1) or found.group(2)) if found else None
    return Word(name, program.line, program.column) if name in TRL_TRAINERS else None


def _openrlhf_program(program: Word | None, arguments: tuple) -> Word | None:
    """The stage of OpenRLHF's trainer a program is (``openrlhf.cli.train_dpo``, its file, or a
    ``train_sft.py`` copy given OpenRLHF's flags): what its flags are read as."""
    text = program.text if program is not None and program.text else ""
    ours = text.startswith("openrlhf.") or "openrlhf/" in text or any(key in OPENRLHF_MARKS for key, _, _ in arguments)
    stage = trainer_of(text) if ours else None
    return Word(stage, program.line, program.column) if stage is not None else None


def _tune(command: Command, words: list[Word]) -> Launch:
    """``tune run [torchrun options] RECIPE --config FILE [key=value ...]`` (torchtune 0.6 ``tune run``:
    torchrun's options before the recipe; one process without ``--nproc_per_node``)."""
    launch = _torchrun(command, words)
    config = next((value for key, value, _ in launch.arguments if key == "config"), None)
    return replace(launch, launcher="tune", recipe=config, distributed=True,
                   unread="" if config is not None else "tune run without --config: the recipe's own defaults")


def _axolotl(command: Command, words: list[Word]) -> Launch:
    """``axolotl train CONFIG.yml`` (``python -m axolotl.cli.train``): the recipe file, over every
    visible GPU (axolotl starts accelerate)."""
    arguments, positional = _arguments(words)
    recipe = positional[0] if positional else None
    count = Word(None, command.line, 1, unknown="axolotl launches accelerate over every visible GPU")
    return Launch("axolotl", TRAINING, command, recipe, {}, arguments, positional[1:], count, "axolotl", None,
                  recipe=recipe, distributed=True)


# LitGPT 0.5.13 ``litgpt/__main__.py`` PARSER_DATA: the training commands and the script each runs
# (``finetune`` alone is LoRA); 0.4's ``litgpt finetune lora|full|adapter|adapter_v2`` said it in a word.
LITGPT_COMMANDS = {"finetune": "lora", "finetune_lora": "lora", "finetune_full": "full",
                   "finetune_adapter": "adapter", "finetune_adapter_v2": "adapter_v2", "pretrain": "pretrain"}
LITGPT_METHODS = ("lora", "full", "adapter", "adapter_v2")


def _litgpt(command: Command, verb: Word, words: list[Word]) -> Launch:
    """``litgpt finetune_lora [CHECKPOINT] [--config FILE] [--train.micro_batch_size 2 ...]``:
    jsonargparse's flags over the config file; the positional word is ``checkpoint_dir``
    (``model_name`` for pretrain). Fabric starts ``devices`` x ``num_nodes`` processes itself, so the
    job's own settings size it (readers/litgpt.py ``_gpus``)."""
    script = LITGPT_COMMANDS[verb.text]
    if verb.text == "finetune" and words and words[0].text in LITGPT_METHODS:
        verb, script, words = words[0], words[0].text, words[1:]
    arguments, positional = _arguments(words)
    config = next((value for key, value, _ in arguments if key == "config"), None)
    arguments = tuple(a for a in arguments if a[0] != "config")
    if positional:
        arguments += (("model_name" if script == "pretrain" else "checkpoint_dir", positional[0], positional[0]),)
    return Launch("litgpt", TRAINING, command, verb, {}, arguments, positional[1:], None, "devices", None,
                  recipe=config, distributed=True, trainer=Word(script, verb.line, verb.column), reads_as="litgpt")


# TRL 1.16 ``trl/cli/commands/__init__.py``: the training commands, each ``trl/scripts/<name>.py``
# under ``accelerate launch`` (``cli/accelerate_launcher.py``).
TRL_TRAINERS = ("sft", "dpo", "grpo", "kto", "reward", "rloo", "distillation")
# What ``trl <trainer>`` hands to ``accelerate launch`` rather than to the script: the arguments the
# script's ``TrlParser`` does not know (``cli/commands/training.py``), of which these are accelerate
# 1.16's launch options that change the job (``commands/launch.py``); ``--accelerate_config NAME``
# becomes ``--config_file`` (a path, or ``trl/accelerate_configs/NAME.yaml``: ``cli/accelerate_config.py``).
ACCELERATE_OPTIONS = frozenset({"config_file", "accelerate_config", "num_processes", "num_machines", "machine_rank",
                                "main_process_ip", "main_process_port", "mixed_precision", "multi_gpu",
                                "use_deepspeed", "use_fsdp", "zero_stage", "offload_optimizer_device",
                                "offload_param_device", "zero3_init_flag", "deepspeed_config_file", "gpu_ids",
                                "dynamo_backend", "num_cpu_threads_per_process", "rdzv_backend", "same_network",
                                "fsdp_sharding_strategy", "fsdp_offload_params", "fsdp_version"})
# The launchers whose own options are ``accelerate launch``'s.
ACCELERATE_LAUNCHERS = ("accelerate", "trl")


def _trl(command: Command, trainer: Word, words: list[Word]) -> Launch:
    """``trl sft|dpo|grpo|... [--config recipe.yaml] [--key value ...]``: TRL's script for the trainer
    under ``accelerate launch``, the recipe file its ``TrlParser`` reads (``--config``), the
    arguments over it, and accelerate's own options apart; the trainer states the stage."""
    arguments, positional = _arguments(words)
    options = {("config_file" if key == "accelerate_config" else key): value
               for key, value, _ in arguments if key in ACCELERATE_OPTIONS}
    recipe = next((value for key, value, _ in arguments if key == "config"), None)
    own = tuple(a for a in arguments if a[0] not in ACCELERATE_OPTIONS and a[0] != "config")
    program = Word(f"trl/scripts/{trainer.text}.py", trainer.line, trainer.column)
    return Launch("trl", TRAINING, command, program, options, own, positional, options.get("num_processes"),
                  "trl --num_processes", options.get("num_machines"), True, recipe, True, trainer=trainer)


def _program_and_words(rest: list[Word]) -> tuple[Word | None, list[Word]]:
    """The program after a launcher's options (a script, or with ``-m`` a module) and its words."""
    return (rest[0], rest[1:]) if rest else (None, rest)


def _torchrun(command: Command, words: list[Word]) -> Launch:
    options, rest = launcher_options(words, "torchrun")
    program, rest = _program_and_words(rest)
    per_node = options.get("nproc_per_node")
    by = "--nproc_per_node"
    if per_node is not None and per_node.text in ("gpu", "auto"):
        per_node = Word(None, per_node.line, per_node.column, unknown=f"--nproc_per_node {per_node.text} (every "
                        "visible GPU, counted when it runs)")
    if per_node is None:                   # torchrun's default is 1 process per node
        per_node, by = Word("1", command.line, 1), "torchrun's default --nproc_per_node 1"
    nodes = options.get("nnodes")
    if nodes is not None and nodes.text and ":" in nodes.text:          # elastic MIN:MAX: the most it may run on
        nodes = Word(nodes.text.split(":")[-1], nodes.line, nodes.column)
    return _program(command, "torchrun", program, rest, (per_node, by), options, nodes)


def _accelerate(command: Command, words: list[Word]) -> Launch:
    options, rest = launcher_options(words, "accelerate")
    program, rest = _program_and_words(rest)
    processes = options.get("num_processes")
    return _program(command, "accelerate", program, rest, (processes, "accelerate launch --num_processes"), options,
                    options.get("num_machines"), total=True)


def _deepspeed(command: Command, words: list[Word]) -> Launch:
    options, rest = launcher_options(words, "deepspeed")
    program, rest = _program_and_words(rest)
    per_node, by = options.get("num_gpus"), "deepspeed --num_gpus"
    include = options.get("include")
    if per_node is None and include is not None:
        if include.text is None:
            per_node = include
        else:
            hosts = [h for h in include.text.split("@") if h]
            slots = [h.split(":", 1)[1] for h in hosts if ":" in h]
            counted = [len([s for s in slot.split(",") if s.strip()]) for slot in slots]
            per_node = Word(str(max(counted)), include.line, include.column) if counted and all(counted) else \
                Word(None, include.line, include.column, unknown=f"--include {include.text} (no GPU listed)")
        by = "deepspeed --include"
    if per_node is None:
        per_node = Word(None, command.line, 1, unknown="deepspeed without --num_gpus / --include: every visible GPU")
    return _program(command, "deepspeed", program, rest, (per_node, by), options, options.get("num_nodes"))


def _llamafactory(command: Command, words: list[Word]) -> Launch:
    """``llamafactory-cli train [recipe.yaml] [key=value ...] [--key value ...]``: torchrun over
    ``NPROC_PER_NODE`` processes, else every visible GPU (0.9.5 ``launcher``)."""
    variables = {**command.variables, **command.prefix}
    per_node, by = variables.get("NPROC_PER_NODE"), "NPROC_PER_NODE"
    if per_node is None:
        per_node, by = Word(None, command.line, 1, unknown="llamafactory-cli runs torchrun over every visible "
                            "GPU"), "llamafactory-cli"
    overrides = []
    for word in words:
        if word.text and "=" in word.text and not word.text.startswith("-"):
            key, value = word.text.split("=", 1)
            overrides.append(Word(f"--{key}={value}", word.line, word.column))
        else:
            overrides.append(word)
    return _program(command, "llamafactory-cli", command.words[0], overrides, (per_node, by), {},
                    variables.get("NNODES"))


SWIFT_TRAINERS = ("sft", "pt")      # ms-swift's subcommands read as a recipe (readers/swift.py)


def _swift(command: Command, verb: Word, words: list[Word]) -> Launch:
    """``swift sft|pt [config.yaml] --key value ...`` (ms-swift 4.6.0 swift/cli/main.py): torchrun over
    ``NPROC_PER_NODE`` processes a node where it or ``NNODES`` is set (``use_torchrun``); else one
    process, which spreads the model over every GPU ``CUDA_VISIBLE_DEVICES`` names when it names
    several (device_map: its ``is_mp``), a layout vramlint does not price."""
    variables = {**command.variables, **command.prefix}
    per_node, nodes = variables.get("NPROC_PER_NODE"), variables.get("NNODES")
    torchrun = per_node is not None or nodes is not None
    count = (per_node, "NPROC_PER_NODE") if per_node is not None else _one_process(command)
    launch = _program(command, "swift", command.words[0], list(words), count, {}, nodes)
    launch = replace(launch, reads_as="swift", trainer=verb, distributed=torchrun)
    visible = variables.get("CUDA_VISIBLE_DEVICES")
    spread = visible is not None and visible.text is not None and len([d for d in visible.text.split(",") if d]) > 1
    if not torchrun and spread:
        return replace(launch, unread=f"swift {verb.text} without NPROC_PER_NODE spreads the model over the GPUs "
                                      f"CUDA_VISIBLE_DEVICES={visible.text} names (device_map), which is not modelled; "
                                      "NPROC_PER_NODE, one process a GPU, is")
    return launch


def _vllm(command: Command, words: list[Word], model: Word | None) -> Launch:
    """``vllm serve MODEL --opt v`` (vLLM's own short spellings ``-tp`` / ``-pp`` / ``-dp`` too),
    or the API server module with ``--model``: the arguments a ``vllm serve --config`` YAML holds."""
    short = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size"}
    spelled = [Word(short[w.text], w.line, w.column) if w.text in short else w for w in words]
    arguments, positional = _arguments(spelled)
    if model is not None:
        arguments = (("model", model, model),) + arguments
    return Launch("vllm", SERVING, command, model, {}, arguments, positional, None, "vllm", None)


# ``trl vllm-serve``'s own arguments (TRL 1.16.0 trl/scripts/vllm_serve.py ``ScriptArguments``) that
# ``build_command`` passes to ``vllm serve`` under another name, or not at all; and the defaults it
# always passes, which stand over the vLLM release's (its gpu_memory_utilization 0.9, not 0.92).
TRL_SERVE_NAMES = {"vllm_model_impl": "model_impl", "vllm-model-impl": "model_impl", "log_level": None,
                   "log-level": None}
TRL_SERVE_DEFAULTS = {"gpu_memory_utilization": 0.9}


def _trl_vllm_serve(command: Command, verb: Word, words: list[Word]) -> Launch:
    """``trl vllm-serve --model M --tensor_parallel_size 2 ...``: TRL 1.16 runs ``vllm serve M`` with
    its arguments (``build_command``: TP, DP, gpu_memory_utilization, dtype, kv_cache_dtype,
    max_model_len, prefix caching, eager, extra arguments as they are), so it is read as that line,
    with TRL's own defaults where the line leaves them (placed at ``vllm-serve``)."""
    arguments, positional = _arguments(words)
    kept = [(TRL_SERVE_NAMES.get(key, key), value, word) for key, value, word in arguments
            if TRL_SERVE_NAMES.get(key, key) is not None]
    said = {key.replace("-", "_") for key, _, _ in kept}
    model = next((value for key, value, _ in kept if key == "model"), None)
    return Launch("trl", SERVING, command, program=model, arguments=tuple(kept), positional=positional,
                  defaults=tuple((key, value, "trl vllm-serve's default (TRL 1.16 ScriptArguments)")
                                 for key, value in TRL_SERVE_DEFAULTS.items() if key not in said))


# Hydra's own options on a verl launch line (hydra 1.3 ``get_args_parser``): the config's folder and
# name, and the ones that take no value; every other word is a ``key=value`` override.
HYDRA_VALUED = {"--config-path": "config_path", "-cp": "config_path", "--config-name": "config_name",
                "-cn": "config_name", "--config-dir": "config_dir", "-cd": "config_dir"}


def _verl(command: Command, module: Word, words: list[Word]) -> Launch:
    """``python3 -m verl.trainer.main_ppo [--config-path D --config-name N] key=value ...``: the
    overrides as the job's keys, over the config file the Hydra options name (the trainer's own
    ``ppo_trainer`` where they name none); its GPUs are the config's (``trainer.n_gpus_per_node``)."""
    options: dict[str, Word] = {}
    arguments = []
    i = 0
    while i < len(words):
        word = words[i]
        head = word.head or ""
        name, eq, value = head.partition("=")
        if name in HYDRA_VALUED:
            if eq:
                options[HYDRA_VALUED[name]] = after_equals(word, value)
            elif i + 1 < len(words):
                options[HYDRA_VALUED[name]] = words[i + 1]
                i += 1
        elif eq and not name.startswith("-") and re.fullmatch(r"[+~]{0,2}[\w.\-/@]+", name):
            arguments.append((name, after_equals(word, value), word))
        i += 1
    config = _hydra_config(options, command)
    own = VERL_CONFIGS.get((config.text or "").rsplit("/", 1)[-1]) if config is not None else None
    if own is not None:                     # verl's own config by name: its defaults, its strategy said
        config = None
        if own[1] is not None and not any(key == own[0] for key, _, _ in arguments):
            name = options["config_name"]
            arguments.insert(0, (own[0], Word(own[1], name.line, name.column), name))
    stated = {key: value for key, value, _ in arguments}
    return Launch("python", TRAINING, command, module, options, tuple(arguments), (),
                  stated.get("trainer.n_gpus_per_node"), "trainer.n_gpus_per_node", stated.get("trainer.nnodes"),
                  recipe=config, distributed=True, reads_as="verl")


# The keys through which a job states its own GPUs (per node -> nodes): its cluster is the recipe's.
RECIPE_COUNTS = {"trainer.n_gpus_per_node": "trainer.nnodes", "devices": "num_nodes", **RAY_COUNTS}


# verl's own trainer configs by name (verl 0.9.1 verl/trainer/config): read as its composed defaults,
# with the actor strategy each sets (the Megatron one is VL011 until its workers are modelled)
VERL_CONFIGS = {"ppo_trainer.yaml": ("actor_rollout_ref.actor.strategy", None),
                "ppo_megatron_trainer.yaml": ("actor_rollout_ref.actor.strategy", "megatron")}


def _hydra_config(options: dict[str, Word], command: Command) -> Word | None:
    """The config file Hydra composes from ``--config-path`` and ``--config-name`` (``.yaml``
    added), where the line names one; None for the trainer's own."""
    name = options.get("config_name")
    if name is None:
        return None
    folder = options.get("config_path")
    if name.text is None or (folder is not None and folder.text is None):
        return Word(None, name.line, name.column, unknown=name.unknown or (folder.unknown if folder else ""))
    text = name.text if name.text.endswith((".yaml", ".yml")) else name.text + ".yaml"
    return Word(f"{folder.text.rstrip('/')}/{text}" if folder is not None and folder.text else text,
                name.line, name.column)


def _sglang(command: Command, words: list[Word]) -> Launch:
    """``python -m sglang.launch_server`` / ``sglang serve`` (0.5.23 ``prepare_server_args``): its
    flags, over the ``--config`` YAML it reads (the line wins), on TP x PP x DP GPUs over
    ``--nnodes`` nodes."""
    arguments, positional = _arguments(words)
    config = next((value for key, value, _ in arguments if key == "config"), None)
    own = tuple(a for a in arguments if a[0] != "config")
    sizes = {sglang_key(key): value for key, value, _ in own}
    counts = [sizes.get(name) for name in ("tp_size", "pp_size", "dp_size")]
    stated = [word for word in counts if word is not None]
    unknown = next((word for word in stated if word.text is None or not word.text.isdigit()), None)
    nodes = sizes.get("nnodes")
    if unknown is not None:
        per_node = unknown
    else:
        total = 1
        for word in stated:
            total *= int(word.text)
        spread = int(nodes.text) if nodes is not None and (nodes.text or "").isdigit() else 1
        at = stated[0] if stated else Word(None, command.line, 1)
        per_node = Word(str(max(1, total // max(1, spread))), at.line or command.line, at.column)
    by = "--tp-size x --pp-size x --dp-size" if stated else "SGLang's default --tp-size 1"
    return Launch("sglang", SERVING, command, sizes.get("model_path"), {}, own, positional, per_node, by, nodes,
                  recipe=config, distributed=True, reads_as="sglang")


# -- the job's files and GPUs ------------------------------------------------------------------

RECIPE_SUFFIXES = (".yaml", ".yml", ".json")


def value_of(word: Word | None) -> object:
    """An argument as ``HfArgumentParser`` and YAML read it: a bare flag is True, ``True`` /
    ``false`` booleans, whole and decimal numbers, else the text."""
    if word is None:
        return True
    text = word.text or ""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return text


def recipe_word(positional: tuple[Word, ...]) -> Word | None:
    """The recipe file a program parses first (``src/train.py recipe.yaml``, ``llamafactory-cli
    train recipe.yaml``, ``run_spin.py config.yaml``): its first positional YAML or JSON word."""
    return next((w for w in positional if w.text and w.text.endswith(RECIPE_SUFFIXES)), None)


def arguments_data(launch: Launch) -> tuple[dict, dict[str, tuple[int, int]], list[tuple[str, Word]]]:
    """The program's known arguments as a recipe mapping, their positions in the script, and the
    arguments whose values only the run knows."""
    data: dict = {}
    positions: dict[str, tuple[int, int]] = {}
    unknown: list[tuple[str, Word]] = []
    for key, value, word in launch.arguments:
        if value is not None and value.text is None:
            unknown.append((key, value))
            continue
        data[key] = value_of(value)
        positions[f"$.{key}"] = (word.line, word.column)
    return data, positions, unknown


@dataclass(frozen=True)
class StatedGpus:
    """The GPUs a launch states: processes per node and nodes, each with the word that states it
    (None where nothing does), the word that makes the count unknown, and contradictions."""

    per_node: int | None
    nodes: int
    per_node_at: Word | None = None
    nodes_at: Word | None = None
    unknown: Word | None = None
    conflicts: tuple[tuple[Word, str], ...] = ()
    by: str = ""


def sbatch_options(lines: list[tuple[str, int]]) -> dict[str, Word]:
    """``#SBATCH`` options by their long name (``-N 2`` is ``nodes``), each a word at its line."""
    short = {"N": "nodes", "G": "gpus", "n": "ntasks", "c": "cpus-per-task", "p": "partition", "C": "constraint"}
    out = {}
    for text, line in lines:
        for match in re.finditer(r"(?:--([\w-]+)(?:[= ]([^\s]+))?|-([A-Za-z])\s*([^\s-][^\s]*)?)", text):
            name = match.group(1) or short.get(match.group(3) or "", match.group(3) or "")
            value = match.group(2) if match.group(1) else match.group(4)
            out[name] = Word(value or "", line, match.start() + 9)
    return out


def _count(text: str | None) -> int | None:
    """A GPU count as SLURM writes it: ``8``, ``gpu:8``, ``gpu:h100:8``, ``h100:8``."""
    if text is None:
        return None
    last = text.split(",")[0].split(":")[-1]
    return int(last) if last.isdigit() and int(last) > 0 else None


def slurm_variables(options: dict[str, Word]) -> dict[str, Word]:
    """What SLURM sets in the job's environment from its ``#SBATCH`` options (the ones a launch
    line uses for its counts): ``SLURM_NNODES``, ``SLURM_GPUS_ON_NODE``, ..."""
    out = {}
    nodes = options.get("nodes")
    if nodes is not None and nodes.text and nodes.text.split("-")[-1].isdigit():
        word = Word(nodes.text.split("-")[-1], nodes.line, nodes.column)
        out.update(SLURM_NNODES=word, SLURM_JOB_NUM_NODES=word)
    per_node = _sbatch_per_node(options)
    if per_node is not None:
        out.update(SLURM_GPUS_ON_NODE=per_node, SLURM_GPUS_PER_NODE=per_node)
    tasks = options.get("ntasks-per-node")
    if tasks is not None and tasks.text and tasks.text.isdigit():
        out["SLURM_NTASKS_PER_NODE"] = tasks
    return out


def _sbatch_per_node(options: dict[str, Word]) -> Word | None:
    for name in ("gpus-per-node", "gres"):
        word = options.get(name)
        if word is not None and _count(word.text):
            return Word(str(_count(word.text)), word.line, word.column)
    total, nodes = options.get("gpus"), options.get("nodes")
    whole = nodes.text.split("-")[-1] if nodes is not None and nodes.text else "1"
    if total is not None and _count(total.text) and whole.isdigit() and _count(total.text) % int(whole) == 0:
        return Word(str(_count(total.text) // int(whole)), total.line, total.column)
    return None


def stated_gpus(launch: Launch, options: dict[str, Word]) -> StatedGpus:
    """The processes per node and the nodes a launch runs on: the launcher's own count, else
    ``CUDA_VISIBLE_DEVICES``, else the ``#SBATCH`` request; a count past the visible GPUs (or the
    GPUs sbatch allocates) is a contradiction, said as the launch would fail."""
    visible_word = _visible(launch.command)
    visible = visible_count(visible_word)
    sbatch = _sbatch_per_node(options)
    nodes_word = launch.nodes or slurm_variables(options).get("SLURM_NNODES")
    nodes = int(nodes_word.text) if nodes_word is not None and nodes_word.text and nodes_word.text.isdigit() else 1
    unknown_nodes = nodes_word if nodes_word is not None and nodes_word.text is None else None
    word, by = launch.per_node, launch.per_node_by
    per_node = None
    if word is not None and word.text is not None and word.text.isdigit() and int(word.text) > 0:
        per_node = int(word.text)
        if launch.total:
            per_node = per_node // nodes if per_node % nodes == 0 else None
    elif visible:
        word, by, per_node = visible_word, "CUDA_VISIBLE_DEVICES", visible
    elif sbatch is not None:
        word, by, per_node = sbatch, "#SBATCH", int(sbatch.text)
    conflicts = []
    if per_node is not None and visible and per_node > visible and by != "CUDA_VISIBLE_DEVICES":
        conflicts.append((word, f"{by} {per_node} but CUDA_VISIBLE_DEVICES={visible_word.text} shows {visible} GPU(s): "
                                f"processes {visible} to {per_node - 1} fail at torch.cuda.set_device "
                                "(CUDA error: invalid device ordinal)"))
    if per_node is not None and sbatch is not None and per_node > int(sbatch.text) and by != "#SBATCH":
        conflicts.append((word, f"{by} {per_node} but #SBATCH allocates {sbatch.text} GPU(s) per node (line "
                                f"{sbatch.line}): processes past them fail at torch.cuda.set_device"))
    unknown = word if per_node is None and word is not None and word.text is None else unknown_nodes
    return StatedGpus(per_node, nodes, word if per_node is not None else None, nodes_word, unknown,
                      tuple(conflicts), by)


def submitted_unknown(commands: list[Command]) -> list[tuple[str, int]]:
    """The scripts a script hands work to that only the run names (``srun ... bash ${1}``,
    ``sbatch $JOB_SCRIPT``): each as written, with its line."""
    out = []
    for command in commands:
        words = list(command.words)
        if not words or (words[0].text or "").rsplit("/", 1)[-1] not in ("sbatch", "srun", "bash", "sh"):
            continue
        if submitted([command]):
            continue
        _, rest = launcher_options(words[1:], "srun" if words[0].text.endswith("srun") else "")
        while rest and rest[0].text in ("bash", "sh"):
            rest = rest[1:]
        if rest and rest[0].text is None:
            out.append((rest[0].unknown or "a script only the run names", command.line))
    return out


def submitted(commands: list[Command]) -> list[str]:
    """The scripts a script hands the job to (``sbatch job.slurm``, ``srun ./train/sft.sh``,
    ``bash run.sh``): checked as files of their own."""
    out = []
    for command in commands:
        words = [w for w in command.words if w.text is not None]
        names = [w.text for w in words]
        if not names:
            continue
        head = names[0].rsplit("/", 1)[-1]
        if head in ("sbatch", "srun", "bash", "sh") or names[0].endswith((".sh", ".slurm", ".sbatch")):
            found = next((n for n in names if n.endswith((".sh", ".slurm", ".sbatch"))), None)
            if found:
                out.append(found)
    return out


# accelerate 1.16 ``DeepSpeedPlugin``: ``zero_stage`` 2 when ``--use_deepspeed`` names none.
ACCELERATE_ZERO_STAGE = 2
FSDP_STRATEGIES = {"1": "full_shard", "2": "shard_grad_op", "3": "no_shard", "4": "hybrid_shard",
                   "full_shard": "full_shard", "shard_grad_op": "shard_grad_op", "no_shard": "no_shard",
                   "hybrid_shard": "hybrid_shard"}


def accelerate_settings(launch: Launch) -> list[tuple[str, object, Word]]:
    """What ``accelerate launch``'s own flags set, as the training arguments that say the same
    (key, value, the flag's word): its DeepSpeed plugin (``--deepspeed_config_file``, or
    ``--use_deepspeed`` with ``--zero_stage`` and the offload devices) as a ``deepspeed`` config,
    ``--use_fsdp`` as ``fsdp``, ``--mixed_precision`` as ``bf16`` / ``fp16``. Accelerate hands
    these to the script's Trainer, so the job is the same as with the keys written out."""
    if launch.launcher not in ACCELERATE_LAUNCHERS:
        return []
    options, out = launch.options, []
    text = lambda key: (options.get(key).text if options.get(key) is not None else None)  # noqa: E731
    ds_file = options.get("deepspeed_config_file")
    if ds_file is not None and ds_file.text:
        out.append(("deepspeed", ds_file.text, ds_file))
    elif "use_deepspeed" in options:
        stage = text("zero_stage")
        config: dict = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
                        "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
                        "zero_optimization": {"stage": int(stage) if stage and stage.isdigit() else
                                              ACCELERATE_ZERO_STAGE}}
        for device in ("offload_optimizer", "offload_param"):
            chosen = text(f"{device}_device")
            if chosen and chosen != "none":
                config["zero_optimization"][device] = {"device": chosen}
        flag = options.get("zero_stage") or next(w for w in launch.command.words if w.text == "--use_deepspeed")
        out.append(("deepspeed", config, flag))
    if "use_fsdp" in options:
        strategy = FSDP_STRATEGIES.get((text("fsdp_sharding_strategy") or "full_shard").lower(), "full_shard")
        offload = " offload" if (text("fsdp_offload_params") or "").lower() == "true" else ""
        flag = options.get("fsdp_sharding_strategy") or next(w for w in launch.command.words if w.text == "--use_fsdp")
        out.append(("fsdp", f"{strategy}{offload} auto_wrap", flag))
    precision = options.get("mixed_precision")
    if precision is not None and precision.text in ("bf16", "fp16"):
        out.append((precision.text, True, precision))
    return out
