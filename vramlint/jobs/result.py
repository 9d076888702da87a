"""What checking a file works with and what it ends with: the ``Context`` (the GPUs, the model,
the merged settings and which of them the command line states) and the ``FileResult`` each job
of the file fills (its findings, plan or serving estimate, notes, and the files it was read from).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramlint.documents import Location
from vramlint.findings import ERROR, Finding
from vramlint.hardware import Cluster
from vramlint.memory import Estimate
from vramlint.models.shape import ModelShape
from vramlint.plan import Flags, Plan, workload_from_flags
from vramlint.readers.accelerate import PRECISION
from vramlint.readers.deepspeed import Fact
from vramlint.rules.fit import NEAR_THRESHOLD


@dataclass(frozen=True)
class Context:
    """What checking a file needs beside the file: the GPUs, the model (``--model`` or the
    settings'), the merged settings and command-line values, and which of those the command line
    (or a per-file override) states — those win over what a file says, with a finding."""

    cluster: Cluster
    values: dict = field(default_factory=dict)
    stated: frozenset[str] = frozenset()
    model: ModelShape | None = None
    near: float = NEAR_THRESHOLD
    host_ram: int | None = None
    kind: str | None = None
    run_paths: frozenset[str] = frozenset()     # every file of this run, resolved
    rules: frozenset[str] | None = None         # the rule codes reported (``selection.enabled``); None: all
    warn: frozenset[str] = frozenset()          # codes reported as warnings whatever their severity (``--warn``)
    trainer: Fact | None = None                 # the trainer a launch names (``trl dpo``): the recipe's stage
    from_launch: bool = False                   # checked as the job a launch line starts (its file is the line's)

    @property
    def flags(self) -> Flags:
        values = self.values
        precision = PRECISION.get(values.get("mixed_precision"))
        names = {"micro_batch": "micro_batch", "grad_accum": "grad_accum", "mixed_precision": "precision",
                 "zero_stage": "zero_stage"}
        return Flags(micro_batch=values.get("micro_batch"), seq_len=values.get("seq_len"),
                     grad_accum=values.get("grad_accum"), precision=precision, zero_stage=values.get("zero_stage"),
                     grad_checkpointing=bool(values.get("grad_checkpointing")),
                     workload=workload_from_flags(values),
                     stated=frozenset(field for value, field in names.items() if value in self.stated))


@dataclass
class FileResult:
    path: str
    kind: str | None = None                           # the format detected (or forced)
    via: str | None = None                            # the recipe this file was checked as part of
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    estimate: Estimate | None = None
    notes: list[str] = field(default_factory=list)    # why no memory estimate was made, and what was skipped
    serving: tuple | None = None                      # (Serving, ServingEstimate) of a vLLM config
    cluster: Cluster | None = None
    model_at: Location | None = None                  # the line that names the model, where a file names it
    resolving: object = None                          # the model name the job resolved (a launch's groups: said once)
    job: bool = False                                 # the file states a job (not only settings, not another kind)
    why_not: str = ""                                 # why a job has no estimate, where no finding says it
    reads: list[str] = field(default_factory=list)    # the other files the job is read from (recipe, configs)
    gpus_from: str | None = None                      # path:line of what states the GPUs, where a file does

    @property
    def model(self) -> ModelShape | None:
        if self.plan is not None:
            return self.plan.model
        return self.serving[0].model if self.serving else None

    @property
    def status(self) -> str:
        """``estimated``, ``not estimated`` (a job with no estimate: its findings say why) or
        ``skipped`` (no job of its own: its notes say what the file is)."""
        if self.plan is not None or self.serving is not None:
            return ESTIMATED
        unreadable = self.kind is None and any(f.severity == ERROR for f in self.findings)
        return NOT_ESTIMATED if self.job or unreadable else SKIPPED

    def skip(self, why: str) -> None:
        """The file states no job of its own: said once, as the first note."""
        self.notes.insert(0, why)

    def unplanned(self, why: str) -> None:
        """The job cannot be estimated: why, kept for the finding ``_unexplained`` gives where the
        file's own findings do not say it (an invalid ZeRO stage has its VL102 already)."""
        self.why_not = why
        self.notes.append(why)


ESTIMATED, NOT_ESTIMATED, SKIPPED = "estimated", "not estimated", "skipped"


NO_GPUS = "--gpus not given and no gpus in [tool.vramlint] of pyproject.toml"
