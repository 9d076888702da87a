"""The words around a launch that are not the job: the wrappers a command runs under (``srun``,
``env``, ``nohup``, ``timeout``, a profiler, an environment manager's ``run``, a container, an MPI
launcher) and a launcher's own options, each told apart by the rules of the tool's own parser at a
named release (readers/launch.py reads the job the words after them start)."""

from __future__ import annotations

import re

from vramlint.readers.shell import Word

# Options that take no value, per launcher (all others take one: ``--opt v`` or ``--opt=v``); the
# deepspeed launcher's are its parser's store_true options (0.19.8 ``launcher/runner.py``: its
# ``--enable_each_rank_log DIR`` takes a value).
FLAGS = {
    "torchrun": {"standalone", "no_python", "run_path", "m", "module", "use_env", "no-python", "run-path"},
    "accelerate": {"multi_gpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "use_xpu", "cpu", "m", "module",
                   "no_python", "debug", "quiet", "q", "same_network", "tpu", "tpu_use_cluster", "tpu_use_sudo",
                   "enable_cpu_affinity", "deepspeed_moe_layer_cls_names", "dynamo_use_fullgraph",
                   "dynamo_use_dynamic", "dynamo_use_regional_compilation"},
    "deepspeed": {"module", "no_python", "no_local_rank", "bind_cores_to_rank", "force_multi", "save_pid", "no_ssh",
                  "no_ssh_check", "q", "quiet"},
    "srun": {"exclusive", "overlap", "unbuffered", "u", "l", "label", "verbose", "v", "quiet", "Q", "K",
             "kill-on-bad-exit", "no-kill", "pty", "x11"},
}
WRAPPERS = {"nohup", "exec", "time", "nice", "stdbuf", "setsid", "command", "builtin", "eval"}
# Environment managers that run a command in their environment, after their own options (``uv run
# --extra ssm python -m torch.distributed.run ...``, Megatron-LM's examples; ``conda run -n env
# torchrun ...``); the value each needs is the word after a non-flag option. Their boolean options:
# uv 0.9.0 (``uv run --help``); conda 25.x (docs.conda.io commands/run: -v, --dev,
# --debug-wrapper-scripts, -s / --no-capture-output / --live-stream); micromamba 2.x adds --clean-env
# and -d / --detach; poetry 2.x's run has only the global flags; pipenv's run has none.
_CONDA_FLAGS = {"v", "verbose", "dev", "debug-wrapper-scripts", "s", "no-capture-output", "live-stream"}
RUNNERS = {
    "uv": {"all-extras", "no-dev", "no-default-groups", "all-groups", "m", "module", "only-dev", "no-editable",
           "exact", "no-env-file", "isolated", "active", "no-sync", "locked", "frozen", "s", "script", "gui-script",
           "all-packages", "no-project", "no-index", "U", "upgrade", "no-sources", "reinstall", "compile-bytecode",
           "no-build-isolation", "no-build", "no-binary", "n", "no-cache", "refresh", "managed-python",
           "no-managed-python", "no-python-downloads", "q", "quiet", "v", "verbose", "native-tls", "offline",
           "no-progress", "no-config"},
    "conda": _CONDA_FLAGS, "mamba": _CONDA_FLAGS | {"clean-env", "d", "detach"},
    "micromamba": _CONDA_FLAGS | {"clean-env", "d", "detach"},
    "poetry": {"q", "quiet", "v", "verbose", "vv", "vvv", "n", "no-interaction", "no-plugins", "no-cache", "ansi",
               "no-ansi"},
    "pipenv": set(),
}
# Profilers that run a command under them, after their options: ``nsys profile [options] cmd`` (Nsight
# Systems; ``nsys launch`` alike), ``ncu [options] cmd`` (Nsight Compute)
PROFILERS = {"nsys": ("profile", "launch"), "ncu": ()}
# ``apptainer run|exec [options] IMAGE command`` (Apptainer 1.3 / SingularityCE 4 ``exec --help``: these
# take no value; -B / --bind, --env, --home, --overlay, --pwd, --mount and the rest take one)
CONTAINERS = {"apptainer", "singularity"}
APPTAINER_FLAGS = {"nv", "nvccli", "rocm", "e", "cleanenv", "c", "contain", "C", "containall", "w", "writable",
                   "writable-tmpfs", "f", "fakeroot", "no-home", "u", "userns", "p", "pid", "i", "ipc", "compat",
                   "no-init", "no-privs", "no-https", "keep-privs", "no-nv", "unsquash"}
# Container engines that run a command in an image (``docker run [options] IMAGE [command]``) or in a
# running container (``docker exec [options] NAME command``): their subcommands and their boolean
# options (docker 27 ``docker run --help``: -d, -i, -t, --init, --privileged, -P, --read-only, --rm,
# --no-healthcheck, --oom-kill-disable, -q; podman and nerdctl take the same; enroot 3.5's start: -r /
# --root, -w / --rw). Grouped short flags (``-it``, ``-dit``) are flags too.
ENGINES = {"docker": ("run", "exec"), "podman": ("run", "exec"), "nerdctl": ("run", "exec"),
           "enroot": ("start", "exec")}
ENGINE_FLAGS = {"d", "detach", "i", "interactive", "t", "tty", "init", "privileged", "P", "publish-all",
                "read-only", "rm", "no-healthcheck", "oom-kill-disable", "q", "quiet", "r", "root", "w", "rw",
                "replace"}
# Images whose entrypoint is the job when no command follows them: the arguments after the image are
# its (vLLM's OpenAI image: ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server, docker/Dockerfile;
# TGI's image: text-generation-launcher)
ENTRYPOINTS = ((re.compile(r"(^|/)vllm/vllm-openai(:|@|$)"), ("python3", "-m", "vllm.entrypoints.openai.api_server")),
               (re.compile(r"(^|/)huggingface/text-generation-inference(:|@|$)"), ("text-generation-launcher",)))
# MPI launchers (Open MPI's mpirun / orterun, MPICH and Intel MPI's mpiexec / Hydra): ``mpirun [options]
# python train.py ...`` starts the program once a rank. Their options: two words after --mca / -genv /
# -env (a name and its value), none after a flag, else one; -np / -n the ranks in all, -ppn / -npernode
# / Open MPI's -N and --map-by ppr:N:node the ranks a node.
MPI = {"mpirun", "mpiexec", "mpiexec.hydra", "orterun"}
MPI_TWO = {"mca", "gmca", "genv", "env"}
MPI_FLAGS = {"allow-run-as-root", "oversubscribe", "nooversubscribe", "tag-output", "timestamp-output",
             "report-bindings", "display-map", "l", "label", "v", "verbose", "q", "quiet", "noprefix",
             "print-rank-map", "prepend-rank", "use-hwthread-cpus", "genvall", "genvnone", "envall", "envnone",
             "bind-to-core", "bind-to-socket", "enable-recovery"}
MPI_TOTAL, MPI_PER_NODE = {"np", "n", "c"}, {"ppn", "npernode", "N"}
FLAGS.update({"mpi": MPI_FLAGS, "engine": ENGINE_FLAGS, "apptainer": APPTAINER_FLAGS})
TWO_WORDS = {"mpi": MPI_TWO}              # options that take two words (a name and its value)
GROUPED = {"engine": set("ditPq")}        # short flags that may be written together (``-it``)
# An engine run of an image that asks for GPUs with no command: its entrypoint, which only the image knows
IMAGE_ENTRYPOINT = "the entrypoint of image "
GPU_REQUESTS = ("gpus", "runtime", "device")
# Commands an srun line runs: an unknown word before one of them is an option only the run knows.
COMMANDS = {"bash", "sh", "python", "python3", "torchrun", "accelerate", "deepspeed", "ray", "apptainer",
            "singularity", "llamafactory-cli", "vllm", "tune", "axolotl", "trl", "litgpt", "swift", "megatron",
            "xtuner", "nemo", "oumi", "lmdeploy", "composer", "colossalai", *RUNNERS, *MPI, *ENGINES}


def mpi_ranks(words: list[Word]) -> tuple[Word | None, Word | None, list[Word]]:
    """An MPI launcher's ranks in all and a node, and the command after its options."""
    options, rest = launcher_options(words[1:], "mpi")
    total = next((options[k] for k in MPI_TOTAL if options.get(k) is not None), None)
    per_node = next((options[k] for k in MPI_PER_NODE if options.get(k) is not None), None)
    placed = options.get("map_by")
    if per_node is None and placed is not None and re.fullmatch(r"ppr:\d+:node", placed.text or ""):
        per_node = Word(placed.text.split(":")[1], placed.line, placed.column)
    return total, per_node, rest[1:] if rest and rest[0].text == "--" else rest


def unwrapped(words: list[Word], prefix: dict[str, Word]) -> list[Word]:
    """The command under ``srun [options]``, ``env A=B``, ``nohup``, ``exec``, ``time``, ``timeout D``,
    a profiler (``nsys profile [options]``)."""
    while words and words[0].text is not None:
        head = words[0].text.rsplit("/", 1)[-1]
        if head in WRAPPERS:
            words = words[1:]
        elif head == "timeout" and len(words) > 2:
            words = words[2:]
        elif head == "env":
            words = words[1:]
            while words and words[0].text and re.match(r"^[A-Za-z_]\w*=", words[0].text):
                key, value = words[0].text.split("=", 1)
                prefix[key] = Word(value, words[0].line, words[0].column)
                words = words[1:]
        elif head == "srun":
            _, words = launcher_options(words[1:], "srun")
            known = [i for i, w in enumerate(words) if (w.text or "").rsplit("/", 1)[-1] in COMMANDS]
            if words and known and (words[0].text or "").rsplit("/", 1)[-1] not in COMMANDS:
                words = words[known[0]:]          # ``srun $EXTRA_ARGS python ...``, ``srun env.sh apptainer ...``
        elif head in RUNNERS and len(words) > 1 and words[1].text == "run":
            words = _run_in_environment(words[2:], head)
        elif head in PROFILERS and len(words) > 1 and (not PROFILERS[head] or words[1].text in PROFILERS[head]):
            _, words = launcher_options(words[2 if PROFILERS[head] else 1:], head)
        elif head in ENGINES and len(words) > 1 and words[1].text in ENGINES[head]:
            words = in_container(words[2:])
        elif head in CONTAINERS and len(words) > 1 and words[1].text in ("run", "exec"):
            _, words = launcher_options(words[2:], "apptainer")
            words = words[1:]                     # the image
        else:
            break
    return words


def _run_in_environment(words: list[Word], runner: str) -> list[Word]:
    """The command ``uv run`` / ``conda run`` / ``poetry run`` runs, after the runner's options and
    an optional ``--``; ``uv run -m MODULE`` is ``python -m MODULE`` (uv's ``--module``)."""
    options, words = launcher_options(words, runner)
    if words and words[0].text == "--":
        words = words[1:]
    if runner == "uv" and ("m" in options or "module" in options) and words:
        words = [Word("python", words[0].line, words[0].column), Word("-m", words[0].line, words[0].column), *words]
    return words


def in_container(words: list[Word]) -> list[Word]:
    """The command a container engine runs, after its options and the image (or container): the
    words after it, with ``--entrypoint X`` before them, or the image's own entrypoint where no
    command follows: one ``ENTRYPOINTS`` knows (``docker run vllm/vllm-openai --model M``), else, where
    the run asks for GPUs, a word only the image knows (a job, never a skip)."""
    options, rest = launcher_options(words, "engine")
    if rest and rest[0].text == "--":
        rest = rest[1:]
    if not rest:
        return []
    image, rest = rest[0], rest[1:]
    entry = options.get("entrypoint")
    if entry is not None:
        return [entry, *rest]
    if rest and not (rest[0].head or "").startswith("-"):
        return rest
    for pattern, command in ENTRYPOINTS:
        if pattern.search(image.text or ""):
            return [Word(w, image.line, image.column) for w in command] + rest
    if any(options.get(key) is not None for key in GPU_REQUESTS):
        return [Word(None, image.line, image.column, unknown=IMAGE_ENTRYPOINT + (image.text or image.unknown))]
    return []


def launcher_options(words: list[Word], launcher: str) -> tuple[dict[str, Word | None], list[Word]]:
    """A launcher's own options (until the first word that is not one) and the words after them: a
    flag (``FLAGS``, or a group of them, ``GROUPED``) takes no value, a ``TWO_WORDS`` option two, any
    other one (``--opt v`` or ``--opt=v``), unless the next word is an option itself."""
    options: dict[str, Word | None] = {}
    flags = FLAGS.get(launcher) or RUNNERS.get(launcher, set())
    two, grouped = TWO_WORDS.get(launcher, set()), GROUPED.get(launcher, set())
    i = 0
    while i < len(words):
        text = words[i].head
        if text is None or not text.startswith("-") or text in ("-", "--"):
            break
        key, eq, value = text.lstrip("-").partition("=")
        together = grouped and not text.startswith("--") and len(key) > 1 and set(key) <= grouped
        if eq:
            options[option_key(key)] = after_equals(words[i], value)
            i += 1
        elif key in two:
            options[option_key(key)] = words[i + 2] if i + 2 < len(words) else None
            i += 3
        elif together or key in flags or option_key(key) in flags or i + 1 >= len(words) or \
                (words[i + 1].head or "").startswith("--"):
            options[option_key(key)] = None
            i += 1
        else:
            options[option_key(key)] = words[i + 1]
            i += 2
    return options, words[i:]


def after_equals(word: Word, value: str) -> Word:
    """The value of ``--key=value``: known, or what makes it unknown (``--nnodes=$N``)."""
    if word.text is not None:
        return Word(value, word.line, word.column)
    return Word(None, word.line, word.column, unknown=word.unknown, parts=word.parts)


def option_key(key: str) -> str:
    return key.replace("-", "_")
