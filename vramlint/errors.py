"""The one exception type the command line turns into a one-line message and exit code 2.

Anything a user can get wrong (a GPU spec, a model name, a file that is not a model config)
raises :class:`UsageError` with a message that says what was wrong and what is accepted.
Problems *inside* a config file that has a location are Findings, not exceptions.
"""


class UsageError(Exception):
    """Bad input from the command line or a referenced file; exit code 2, never a traceback."""


class UnplannableError(UsageError):
    """A config whose own findings already say why no memory estimate can be made (an invalid
    ZeRO stage, say): the file gets its findings and a note, not exit code 2."""


class ModelNotFound(UsageError):
    """A model name that resolves nowhere; ``local``: it reads as a path on the machine that ran
    the job (an earlier run's output), so no Hub command can fetch it and the fix is to name the
    model it was trained from."""

    def __init__(self, message: str, local: bool = False) -> None:
        super().__init__(message)
        self.local = local


def clipped(text: str, most: int = 40) -> str:
    """A value quoted in a one-line message, cut to ``most`` characters: a 5,000-character GPU
    spec or glob is named, not printed whole."""
    return text if len(text) <= most else text[:most - 3] + "..."
