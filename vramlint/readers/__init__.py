"""One reader per config format; each turns a Document into typed facts, never arithmetic.

``KINDS`` names the formats ``check --kind`` can force; ``registry.FORMATS`` holds their readers
in the order content detection tries them (the test holds the two to each other).
"""

KINDS = ("torchtune", "llamafactory", "axolotl", "glm", "trl", "deepspeed", "accelerate", "vllm", "skypilot", "dstack",
         "kubernetes", "github-actions")
# ``launch``: a shell or sbatch script, whatever its name (readers/shell.py, readers/launch.py).
SCRIPT_KIND = "launch"
