"""One reader per config format; each turns a Document into typed facts, never arithmetic."""

KINDS = ("deepspeed", "accelerate", "vllm")   # the formats ``check --kind`` can force
