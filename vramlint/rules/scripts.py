"""Rules about launch scripts (shell and sbatch files): what the script leaves to the run, and
GPU counts that contradict each other, said as the launch would fail."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramlint.documents import Location
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.rules.base import Rule

if TYPE_CHECKING:
    from vramlint.readers.shell import Word

VALUE_UNKNOWN = ("VL014", "launch-value-unknown", WARNING)
GPUS_CONTRADICT = ("VL315", "launch-gpus-contradict", ERROR)
SBATCH_VARIABLE = ("VL316", "sbatch-variable", WARNING)
RULES = (
    Rule(*VALUE_UNKNOWN, summary="A launch script passes a value the job's memory depends on (the model, a batch "
                                 "or sequence size, a precision or sharding switch, the GPU count) that only the run "
                                 "knows: a command's output, a script argument, a variable the script never sets. "
                                 "The estimate takes the framework's default (or the flag or setting that states "
                                 "it); give the value in the script, or the flag, for an estimate of the job as "
                                 "it runs.",
         bad='torchrun --nproc_per_node $(nvidia-smi -L | wc -l) train.py --per_device_train_batch_size $BS',
         good="torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4"),
    Rule(*GPUS_CONTRADICT, summary="The launch starts more processes per node than the GPUs the script leaves "
                                   "visible (CUDA_VISIBLE_DEVICES) or sbatch allocates (#SBATCH --gres / "
                                   "--gpus-per-node): the processes past them fail at torch.cuda.set_device.",
         bad="CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node 8 train.py",
         good="CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node 4 train.py"),
    Rule(*SBATCH_VARIABLE, summary="An #SBATCH line holds a shell variable: sbatch reads these lines before any shell "
                                   "runs and does not expand them, so the request is the literal text.",
         bad="#SBATCH --nodes=$NNODES", good="#SBATCH --nodes=2   # or: sbatch --nodes=$NNODES job.sbatch"),
)


def value_unknown(path: str, what: str, word: Word, stands: str) -> Finding:
    """``what`` (``--per_device_train_batch_size``) is written as something only the run knows."""
    return Finding(*VALUE_UNKNOWN, Location(path, "$", word.line, word.column),
                   f"{what} is {word.unknown or 'not known'}: known only when the script runs; {stands}",
                   hint="write the value in the script, or give it on vramlint's command line")


def gpus_contradict(path: str, word: Word, message: str) -> Finding:
    return Finding(*GPUS_CONTRADICT, Location(path, "$", word.line, word.column), message,
                   hint="start as many processes per node as GPUs are visible")


def sbatch_variable(path: str, option: str, line: int) -> Finding:
    return Finding(*SBATCH_VARIABLE, Location(path, "$", line, 1),
                   f"#SBATCH {option}: sbatch does not expand variables in #SBATCH lines",
                   hint="write the value, or pass it on the sbatch command line")
